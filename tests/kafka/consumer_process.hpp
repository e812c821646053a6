// Test support for the Kafka crash tests: `ConsumerProcess`, one
// kafka_consumer_process child (posix_spawn) whose stdout is captured, waited
// for with a deadline or SIGKILLed from outside.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kafka_connector_fixture.hpp"
#include "support/child_process.hpp"

extern char** environ;

namespace harvest::kafka::testing {

// How a consumer process ended, and what it printed on stdout.
struct Exit {
  bool exited = false;
  int code = -1;
  bool signaled = false;
  int signal = 0;
  std::string output;
};

// One kafka_consumer_process child. The destructor SIGKILLs and reaps it if
// it is still running, so a failing test never leaves one behind.
class ConsumerProcess {
 public:
  ConsumerProcess(const std::vector<std::string>& args, const std::vector<std::string>& extra_env)
      : output_path_(::testing::TempDir() + unique_name("consumer-out")) {
    std::vector<std::string> argv{HARVEST_KAFKA_CONSUMER_PROCESS};
    argv.insert(argv.end(), args.begin(), args.end());
    // The parent's fault points are its own; the child gets those in extra_env.
    pid_ = harvest::testing::spawn_child(std::move(argv), extra_env, output_path_,
                                         {"HARVEST_FAULT_POINTS="});
  }
  ~ConsumerProcess() {
    kill_now();
    std::remove(output_path_.c_str());
  }
  // SIGKILLs the process (a crash, from outside) and reaps it.
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }
  ConsumerProcess(const ConsumerProcess&) = delete;
  ConsumerProcess& operator=(const ConsumerProcess&) = delete;

  // Waits for the process to end; SIGKILLs it (and fails) after `within`.
  Exit wait(std::chrono::milliseconds within = 90s) {
    Exit exit;
    if (pid_ <= 0) return exit;
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + within;
    pid_t done = 0;
    // Polling interval for another process's exit; nothing relies on it.
    while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    if (done == 0) {
      ADD_FAILURE() << "consumer process " << pid_ << " still running after " << within.count()
                    << " ms; killing it";
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = 0;
    exit.exited = WIFEXITED(status);
    exit.code = exit.exited ? WEXITSTATUS(status) : -1;
    exit.signaled = WIFSIGNALED(status);
    exit.signal = exit.signaled ? WTERMSIG(status) : 0;
    std::ifstream in(output_path_);
    std::stringstream text;
    text << in.rdbuf();
    exit.output = text.str();
    return exit;
  }

 private:
  std::string output_path_;
  pid_t pid_ = 0;
};

// `key=<n>` from the consumer's result line; -1 when absent.
inline long long printed(const std::string& output, const std::string& key) {
  const auto at = output.find(" " + key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(output.substr(at + key.size() + 2));
}

}  // namespace harvest::kafka::testing
