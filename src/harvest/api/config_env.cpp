#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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

}  // namespace harvest::api
