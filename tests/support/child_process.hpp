// Test support: starting a helper program of the test suite as a child
// process (posix_spawn) with its stdout captured to a file, as the crash,
// poison-pill and clock tests do with their worker and consumer processes.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace harvest::testing {

// Spawns `args` (args[0] is the program's path) in this process's
// environment minus the variables named in `drop` ("NAME="), with
// `extra_env` ("NAME=value") set — an extra variable replaces an inherited
// one of the same name — and stdout written to `output_path`. Returns the
// pid, or 0 after a failed expectation.
inline pid_t spawn_child(std::vector<std::string> args, const std::vector<std::string>& extra_env,
                         const std::string& output_path,
                         const std::vector<std::string>& drop = {}) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto name_of = [](const std::string& var) { return var.substr(0, var.find('=') + 1); };
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var(*e);
    bool skip = false;
    for (const auto& d : drop) skip = skip || name_of(var) == d;
    for (const auto& x : extra_env) skip = skip || name_of(var) == name_of(x);
    if (!skip) env_storage.push_back(var);
  }
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
    return 0;
  }
  return pid;
}

}  // namespace harvest::testing
