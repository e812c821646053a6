// The ambient AWS configuration, read the way the AWS SDKs and CLI read it:
// the shared credentials and config files with named profiles, the region
// and the SQS endpoint override (SQS-3).
//
// Every function reads the process environment at call time (nothing is
// cached), so a test may set variables before a call and restore them after.
//
//   AWS_PROFILE                  profile name (default "default")
//   AWS_SHARED_CREDENTIALS_FILE  default ~/.aws/credentials, sections [name]
//   AWS_CONFIG_FILE              default ~/.aws/config, sections [default] and [profile name]
//   AWS_REGION, AWS_DEFAULT_REGION, then the profile's `region`
//   AWS_ENDPOINT_URL_SQS, then AWS_ENDPOINT_URL
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest::sqs {

// Settings of one profile, merged from both files; a key set in the
// credentials file wins over the config file.
struct AwsProfile {
  std::string name;
  // Keys lower-cased, values trimmed.
  std::map<std::string, std::string> settings;
  // Whether either file has a section for this profile.
  bool found = false;

  [[nodiscard]] std::optional<std::string> get(std::string_view key) const;
};

enum class ProfileFileKind {
  kCredentials,  // sections are bare profile names: [name]
  kConfig,       // [default] and [profile name]; other section kinds ignored
};

// Sections of an AWS INI file by profile name. Comment lines start with '#'
// or ';'; an inline comment needs whitespace before the '#' or ';'; indented
// sub-property lines are skipped. In a config file `[profile default]` wins
// over `[default]`.
[[nodiscard]] std::map<std::string, std::map<std::string, std::string>> parse_profile_file(
    std::string_view text, ProfileFileKind kind);

// AWS_PROFILE, else "default".
[[nodiscard]] std::string active_profile_name();
// AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE, else under $HOME/.aws
// ("" when neither the variable nor HOME is set). A leading "~/" expands.
[[nodiscard]] std::string shared_credentials_file_path();
[[nodiscard]] std::string config_file_path();

// Loads profile `name` (default: the active profile) from both files. A
// missing file contributes nothing; a file that exists but cannot be read is
// a config error naming it.
[[nodiscard]] Result<AwsProfile> load_profile(const std::optional<std::string>& name = {});

// AWS_REGION, else AWS_DEFAULT_REGION, else the active profile's `region`.
[[nodiscard]] std::optional<std::string> resolve_region();

// The SQS endpoint URL: `explicit_endpoint`, else AWS_ENDPOINT_URL_SQS, else
// AWS_ENDPOINT_URL, else https://sqs.<region>.amazonaws.com (.com.cn in the
// China partition).
[[nodiscard]] std::string resolve_sqs_endpoint(const std::optional<std::string>& explicit_endpoint,
                                               std::string_view region);

// The value of environment variable `name`, or nullopt when unset or empty.
[[nodiscard]] std::optional<std::string> env(const char* name);

}  // namespace harvest::sqs
