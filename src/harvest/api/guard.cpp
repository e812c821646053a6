#include <algorithm>

#include <harvest/api/guard.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/common/strings.hpp>

namespace harvest::api {

namespace {

// "name:port", "[v6]:port", "[v6]", "name" -> the name or address alone.
std::string_view host_name(std::string_view host) {
  host = trim(host);
  if (host.starts_with('[')) {
    size_t end = host.find(']');
    return end == std::string_view::npos ? host : host.substr(0, end + 1);
  }
  if (std::count(host.begin(), host.end(), ':') == 1) return host.substr(0, host.find(':'));
  return host;
}

bool is_wildcard(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  std::string h = ascii_lower(host_name(host));
  return h == "localhost" || h.starts_with("127.") || h == "::1" || h == "[::1]";
}

std::vector<std::string> default_allowed_hosts(std::string_view bind_host) {
  std::vector<std::string> out{"localhost", "127.0.0.1", "[::1]", "::1"};
  if (!is_wildcard(bind_host) && !is_loopback_host(bind_host)) {
    out.push_back(ascii_lower(bind_host));
  }
  return out;
}

bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed) {
  std::string name = ascii_lower(host_name(host_header));
  if (name.empty()) return false;
  return std::ranges::any_of(allowed, [&](const std::string& a) {
    return a == "*" || ascii_lower(a) == name || ascii_lower(host_name(a)) == name;
  });
}

bool bearer_matches(std::string_view authorization, std::string_view token) {
  authorization = trim(authorization);
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size() ||
      ascii_lower(authorization.substr(0, kScheme.size())) != kScheme) {
    return false;
  }
  // Compare digests, so neither the position of the first difference nor the
  // token's length shows in the time taken.
  const std::string a = sha256_hex(trim(authorization.substr(kScheme.size())));
  const std::string b = sha256_hex(token);
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool is_json_content_type(std::string_view content_type) {
  std::string_view media = trim(content_type.substr(0, content_type.find(';')));
  return ascii_lower(media) == "application/json";
}

}  // namespace harvest::api
