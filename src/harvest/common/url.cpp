#include <fmt/format.h>

#include <algorithm>

#include <harvest/common/strings.hpp>
#include <harvest/common/url.hpp>

namespace harvest {

namespace {

// `url` with the userinfo of its authority (if any) replaced by "***".
std::string redacted(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return std::string(url);
  const size_t start = sep + 3;
  const size_t end = std::min(url.find_first_of("/?#", start), url.size());
  const size_t at = url.substr(start, end - start).rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  return fmt::format("{}***{}", url.substr(0, start), url.substr(start + at));
}

}  // namespace

std::string Url::authority() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port.empty() ? h : h + ":" + port;
}

std::string Url::target() const {
  return query.empty() ? path : path + "?" + query;
}

Result<Url> parse_url(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return fail(Error::config(fmt::format("invalid URL '{}': {}", redacted(url), why)));
  };
  auto sep = url.find("://");
  if (sep == std::string_view::npos) return bad("expected scheme://host");
  Url out;
  out.scheme = ascii_lower(url.substr(0, sep));
  if (out.scheme != "http" && out.scheme != "https") return bad("scheme must be http or https");
  std::string_view rest = url.substr(sep + 3);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? "" : rest.substr(end);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    out.has_userinfo = true;
    authority = authority.substr(at + 1);
  }
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 literal");
    out.host.assign(authority.substr(1, close - 1));
    authority = authority.substr(close + 1);
    if (authority.starts_with(':')) out.port.assign(authority.substr(1));
  } else {
    auto colon = authority.find(':');
    out.host.assign(authority.substr(0, colon));
    if (colon != std::string_view::npos) out.port.assign(authority.substr(colon + 1));
  }
  if (out.host.empty()) return bad("no host");
  if (!out.port.empty() && !std::all_of(out.port.begin(), out.port.end(),
                                        [](unsigned char c) { return c >= '0' && c <= '9'; }))
    return bad("port must be a number");
  tail = tail.substr(0, tail.find('#'));
  if (auto q = tail.find('?'); q != std::string_view::npos) {
    out.query.assign(tail.substr(q + 1));
    tail = tail.substr(0, q);
  }
  out.path_given = !tail.empty();
  out.path = tail.empty() ? "/" : std::string(tail);
  return out;
}

}  // namespace harvest
