// Test support: an environment for the AWS credential chain.
//
// The AWS configuration is read from the environment at call time, so unit
// tests change it — and must put it back, or a later test (or the developer's
// own AWS setup) leaks in (ScopedEnv, in support/). `IsolatedAwsEnv` blanks every variable
// the credential chain reads, points HOME and the profile files into a fresh
// temporary directory and disables instance metadata, so a test sees only
// what it sets itself.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "support/scoped_env.hpp"

namespace harvest::sqs::testing {

using ScopedEnv = harvest::testing::ScopedEnv;

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
