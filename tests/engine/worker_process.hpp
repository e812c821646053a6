// Test support: one engine_worker_process child (posix_spawn), its stdout
// captured to a file. The
// destructor SIGKILLs and reaps it if it still runs, so a failing test never
// leaves one behind.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.hpp"

namespace harvest::engine::testing {

class WorkerProcess {
 public:
  // Runs `engine_worker_process --db db --instance-id instance` in this
  // process's environment with `extra_env` ("NAME=value") set.
  WorkerProcess(const std::string& db, const std::string& instance,
                const std::vector<std::string>& extra_env = {})
      : output_path_(::testing::TempDir() + "worker-" + instance + "-" +
                     std::to_string(++serial())) {
    std::vector<std::string> args{
        HARVEST_ENGINE_WORKER_PROCESS, "--db", db, "--instance-id", instance, "--seconds", "60"};
    pid_ = harvest::testing::spawn_child(std::move(args), extra_env, output_path_);
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::remove(output_path_.c_str());
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Kills it at once (SIGKILL), as a machine or OOM-killer would, and reaps it.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }

  // Waits up to `within` for the process to end; its wait status, or
  // std::nullopt while it still runs.
  std::optional<int> wait_exit(std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return status;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      // Polling another process's exit; nothing relies on the interval.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

  // What it printed so far.
  [[nodiscard]] std::string output() const {
    std::ifstream in(output_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  static int& serial() {
    static int n = 0;
    return n;
  }
  std::string output_path_;
  pid_t pid_ = 0;
};

}  // namespace harvest::engine::testing
