// Test support: scoped changes to the process environment.
//
// The AWS configuration is read from the environment at call time, so unit
// tests change it — and must put it back, or a later test (or the developer's
// own AWS setup) leaks in. `ScopedEnv` snapshots every variable it touches and
// restores them on destruction. `IsolatedAwsEnv` also blanks every variable
// the credential chain reads, points HOME and the profile files into a fresh
// temporary directory and disables instance metadata, so a test sees only
// what it sets itself.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>

namespace harvest::sqs::testing {

class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    if (saved_.contains(name)) return;
    const char* v = std::getenv(name.c_str());
    saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

class IsolatedAwsEnv : public ScopedEnv {
 public:
  IsolatedAwsEnv() {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / ("harvest-sqs-test-" + std::to_string(rd()));
    std::filesystem::create_directories(dir_ / ".aws");
    for (const char* name :
         {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS",
          "AWS_ENDPOINT_URL_STS", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
          "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
          "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
          "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
          "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"})
      unset(name);
    set("HOME", dir_.string());
    set("AWS_SHARED_CREDENTIALS_FILE", credentials_file());
    set("AWS_CONFIG_FILE", config_file());
    set("AWS_EC2_METADATA_DISABLED", "true");
  }
  ~IsolatedAwsEnv() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  [[nodiscard]] std::string credentials_file() const {
    return (dir_ / ".aws/credentials").string();
  }
  [[nodiscard]] std::string config_file() const { return (dir_ / ".aws/config").string(); }
  // Writes `text` to `name` inside the temporary directory; returns its path.
  std::string write_file(const std::string& name, const std::string& text) const {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace harvest::sqs::testing
