// Test support: one engine_worker_process child (posix_spawn), optionally
// under a wrapper command (faketime), its stdout captured to a file. The
// destructor SIGKILLs and reaps it if it still runs, so a failing test never
// leaves one behind.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace harvest::engine::testing {

class WorkerProcess {
 public:
  // Runs `wrapper... engine_worker_process --db db --instance-id instance`
  // in this process's environment with `extra_env` ("NAME=value") set.
  WorkerProcess(const std::string& db, const std::string& instance,
                std::vector<std::string> wrapper = {}, std::vector<std::string> extra_env = {})
      : output_path_(::testing::TempDir() + "worker-" + instance + "-" +
                     std::to_string(++serial())) {
    std::vector<std::string> args = std::move(wrapper);
    for (const char* a : {HARVEST_ENGINE_WORKER_PROCESS, "--db"}) args.emplace_back(a);
    args.insert(args.end(), {db, "--instance-id", instance, "--seconds", "60"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var(*e);
      bool replaced = false;  // an extra variable of the same name wins
      for (const auto& x : extra_env) {
        replaced = replaced || var.substr(0, var.find('=') + 1) == x.substr(0, x.find('=') + 1);
      }
      if (!replaced) env_storage.push_back(var);
    }
    env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
      pid_ = 0;
    }
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
