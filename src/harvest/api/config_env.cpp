#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <harvest/api/config_check.hpp>
#include <harvest/api/guard.hpp>
#include <harvest/api/http_server.hpp>
#include <harvest/common/strings.hpp>

namespace harvest::api {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

constexpr size_t kMaxTokenFileBytes = 4096;

Result<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(Error::config(fmt::format("HARVEST_API_TOKEN_FILE '{}' cannot be opened: {}", path,
                                          std::strerror(errno))));
  }
  std::string text(kMaxTokenFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxTokenFileBytes) {
    return fail(Error::config(fmt::format("HARVEST_API_TOKEN_FILE '{}' is larger than {} bytes",
                                          path, kMaxTokenFileBytes)));
  }
  std::string token(trim(text));
  if (token.empty()) {
    return fail(Error::config(fmt::format("HARVEST_API_TOKEN_FILE '{}' is empty", path)));
  }
  return token;
}

}  // namespace

Result<ApiConfig> api_config_from_env(ApiConfig base) {
  if (auto host = env("HARVEST_HTTP_HOST")) base.host = *host;
  if (auto port = env("HARVEST_HTTP_PORT")) {
    auto [end, ec] = std::from_chars(port->data(), port->data() + port->size(), base.port);
    if (ec != std::errc() || end != port->data() + port->size() || base.port < 0 ||
        base.port > 65535) {
      return fail(Error::config(fmt::format("HARVEST_HTTP_PORT '{}' is not a port number", *port)));
    }
  }
  auto token = env("HARVEST_API_TOKEN");
  auto token_file = env("HARVEST_API_TOKEN_FILE");
  if (token && token_file) {
    return fail(Error::config("set HARVEST_API_TOKEN or HARVEST_API_TOKEN_FILE, not both"));
  }
  if (token) base.token = std::string(trim(*token));
  if (token_file) {
    auto t = read_token_file(*token_file);
    if (!t) return fail(t.error());
    base.token = std::move(*t);
  }
  if (auto hosts = env("HARVEST_API_ALLOWED_HOSTS")) base.allowed_hosts = split_list(*hosts);
  if (auto m = env("HARVEST_API_METRICS_REQUIRE_TOKEN")) {
    if (*m != "0" && *m != "1") {
      return fail(
          Error::config(fmt::format("HARVEST_API_METRICS_REQUIRE_TOKEN '{}' must be 0 or 1", *m)));
    }
    base.metrics_require_token = *m == "1";
  }
  return base;
}

Status validate_api_config(const ApiConfig& c) {
  if (!c.prefix.empty() && (c.prefix.front() != '/' || c.prefix.back() == '/')) {
    return fail(Error::config(fmt::format(
        "ApiConfig::prefix '{}' must be empty or start with '/' and not end with '/' (e.g. "
        "/api/harvest)",
        c.prefix)));
  }
  if (c.prefix.find_first_of(" \t\r\n?#%{}") != std::string::npos) {
    return fail(Error::config(fmt::format(
        "ApiConfig::prefix '{}' must not contain spaces, '?', '#', '%' or braces", c.prefix)));
  }
  if (c.port < 0 || c.port > 65535) {
    return fail(Error::config(fmt::format("ApiConfig::port {} is not a TCP port", c.port)));
  }
  auto positive = [](size_t v, const char* field) -> Status {
    if (v == 0) return fail(Error::config(fmt::format("ApiConfig::{} must be at least 1", field)));
    return {};
  };
  for (auto [v, field] : {std::pair{c.threads, "threads"},
                          {c.max_body_bytes, "max_body_bytes"},
                          {c.max_header_bytes, "max_header_bytes"},
                          {c.max_target_bytes, "max_target_bytes"},
                          {c.max_json_depth, "max_json_depth"},
                          {c.max_connections, "max_connections"},
                          {c.keep_alive_max_requests, "keep_alive_max_requests"}}) {
    if (auto ok = positive(v, field); !ok) return ok;
  }
  if (c.read_timeout.count() <= 0 || c.write_timeout.count() <= 0 ||
      c.keep_alive_timeout.count() <= 0) {
    return fail(Error::config(
        "ApiConfig::read_timeout, write_timeout and keep_alive_timeout must be positive"));
  }
  if (c.lag_sample_interval < std::chrono::milliseconds(50) ||
      c.lag_sample_interval > std::chrono::minutes(10)) {
    return fail(Error::config("ApiConfig::lag_sample_interval must be 50 ms to 10 min"));
  }
  if (c.token.size() > 4096 || c.token.find_first_of(" \t\r\n\f\v", 0) != std::string::npos) {
    return fail(Error::config(
        "ApiConfig::token must be at most 4096 bytes without whitespace (the token itself is "
        "not shown)"));
  }
  if (!c.trace_url_template.empty() &&
      ((!c.trace_url_template.starts_with("http://") &&
        !c.trace_url_template.starts_with("https://")) ||
       c.trace_url_template.find("{trace_id}") == std::string::npos ||
       c.trace_url_template.find_first_of(" \t\r\n\"<>\\") != std::string::npos)) {
    return fail(
        Error::config("ApiConfig::trace_url_template must be an http:// or https:// URL containing "
                      "{trace_id}, e.g. http://localhost:16686/trace/{trace_id}"));
  }
  if (c.token.empty() && !is_loopback_host(c.host) && !c.allow_unauthenticated_remote) {
    return fail(Error::config(fmt::format(
        "ApiConfig::host '{}' is not a loopback address and no API token is set: anyone "
        "reaching the port could start and signal runs. Set ApiConfig::token "
        "(HARVEST_API_TOKEN or HARVEST_API_TOKEN_FILE), or allow_unauthenticated_remote to "
        "accept that",
        c.host)));
  }
  return {};
}

}  // namespace harvest::api
