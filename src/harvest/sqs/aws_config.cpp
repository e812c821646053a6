#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <harvest/common/strings.hpp>
#include <harvest/sqs/aws_config.hpp>

namespace harvest::sqs {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The AWS CLI treats '#' or ';' as the start of a comment only when preceded
// by whitespace, so values such as secret keys may contain either character.
std::string_view strip_inline_comment(std::string_view value) {
  for (size_t i = 1; i < value.size(); ++i) {
    if ((value[i] == '#' || value[i] == ';') && (value[i - 1] == ' ' || value[i - 1] == '\t'))
      return value.substr(0, i);
  }
  return value;
}

std::string expand_home(std::string path) {
  if (path.starts_with("~/")) {
    if (auto home = env("HOME")) return *home + path.substr(1);
  }
  return path;
}

Result<std::map<std::string, std::map<std::string, std::string>>> read_profile_file(
    const std::string& path, ProfileFileKind kind) {
  std::map<std::string, std::map<std::string, std::string>> none;
  if (path.empty()) return none;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return none;
  std::ifstream in(path);
  if (!in) return fail(Error::config(fmt::format("cannot read AWS profile file {}", path)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_profile_file(buffer.str(), kind);
}

}  // namespace

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> AwsProfile::get(std::string_view key) const {
  auto it = settings.find(std::string(key));
  if (it == settings.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::map<std::string, std::string>> parse_profile_file(std::string_view text,
                                                                             ProfileFileKind kind) {
  std::map<std::string, std::map<std::string, std::string>> plain, prefixed;
  std::map<std::string, std::string>* section = nullptr;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      auto close = line.find(']');
      section = nullptr;
      if (close == std::string_view::npos) continue;
      std::string_view name = trim(line.substr(1, close - 1));
      if (kind == ProfileFileKind::kCredentials) {
        section = &plain[std::string(name)];
      } else if (name == "default") {
        section = &plain["default"];
      } else if (name.starts_with("profile ") || name.starts_with("profile\t")) {
        section = &prefixed[std::string(trim(name.substr(8)))];
      }
      // Other config sections ([sso-session x], [services x]) are not profiles.
      continue;
    }
    // An indented line continues the previous property (nested settings such
    // as `s3 =` blocks); harvest reads no nested setting.
    if (raw.front() == ' ' || raw.front() == '\t') continue;
    if (!section) continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key = ascii_lower(trim(line.substr(0, eq)));
    std::string_view value = trim(strip_inline_comment(trim(line.substr(eq + 1))));
    (*section)[key] = std::string(value);
  }
  for (auto& [name, settings] : prefixed) {
    auto& target = plain[name];
    for (auto& [k, v] : settings) target[k] = v;
  }
  return plain;
}

std::string active_profile_name() {
  return env("AWS_PROFILE").value_or("default");
}

std::string shared_credentials_file_path() {
  if (auto p = env("AWS_SHARED_CREDENTIALS_FILE")) return expand_home(*p);
  if (auto home = env("HOME")) return *home + "/.aws/credentials";
  return {};
}

std::string config_file_path() {
  if (auto p = env("AWS_CONFIG_FILE")) return expand_home(*p);
  if (auto home = env("HOME")) return *home + "/.aws/config";
  return {};
}

Result<AwsProfile> load_profile(const std::optional<std::string>& name) {
  AwsProfile profile;
  profile.name = name.value_or(active_profile_name());
  auto config = read_profile_file(config_file_path(), ProfileFileKind::kConfig);
  if (!config) return fail(config.error());
  auto credentials =
      read_profile_file(shared_credentials_file_path(), ProfileFileKind::kCredentials);
  if (!credentials) return fail(credentials.error());
  // Config first, then credentials on top: the credentials file wins.
  for (auto* file : {&*config, &*credentials}) {
    auto it = file->find(profile.name);
    if (it == file->end()) continue;
    profile.found = true;
    for (const auto& [k, v] : it->second) profile.settings[k] = v;
  }
  return profile;
}

std::optional<std::string> resolve_region() {
  if (auto r = env("AWS_REGION")) return r;
  if (auto r = env("AWS_DEFAULT_REGION")) return r;
  auto profile = load_profile();
  // An unreadable profile file is reported by the credential chain; here it
  // only means "no region from the profile".
  if (!profile) return std::nullopt;
  return profile->get("region");
}

std::string resolve_sqs_endpoint(const std::optional<std::string>& explicit_endpoint,
                                 std::string_view region) {
  if (explicit_endpoint && !explicit_endpoint->empty()) return *explicit_endpoint;
  if (auto e = env("AWS_ENDPOINT_URL_SQS")) return *e;
  if (auto e = env("AWS_ENDPOINT_URL")) return *e;
  const char* suffix = region.starts_with("cn-") ? "amazonaws.com.cn" : "amazonaws.com";
  return fmt::format("https://sqs.{}.{}", region, suffix);
}

}  // namespace harvest::sqs
