#include <fmt/format.h>

#include <harvest/api/router.hpp>

namespace harvest::api {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

bool segment_matches(const std::string& pattern, const std::string& segment) {
  if (pattern == "{}") return !segment.empty() && segment.find('/') == std::string::npos;
  return pattern == segment;
}

bool path_matches(const RoutePattern& route, const std::vector<std::string>& segments) {
  if (route.segments.size() != segments.size()) return false;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (!segment_matches(route.segments[i], segments[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<Target> parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/') {
    return fail(Error::bad_request("the request target must be a path starting with '/'"));
  }
  Target t;
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  for (auto raw : split(path.substr(1), '/')) {
    auto seg = percent_decode(raw, false);
    if (!seg) return fail(Error::bad_request("malformed %-escape in the request path"));
    t.segments.push_back(std::move(*seg));
  }
  // "/" and a trailing slash leave an empty last segment: no route has one.
  if (q == std::string_view::npos) return t;
  for (auto pair : split(target.substr(q + 1), '&')) {
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!key || !value) {
      return fail(Error::bad_request("malformed %-escape in the query string"));
    }
    t.query.emplace(std::move(*key), std::move(*value));
  }
  return t;
}

RoutePattern route_pattern(Method method, std::string_view pattern) {
  RoutePattern p{.method = method, .segments = {}};
  for (auto seg : split(pattern.substr(1), '/')) p.segments.emplace_back(seg);
  return p;
}

RouteMatch match_route(const std::vector<RoutePattern>& table, Method method,
                       const std::vector<std::string>& segments) {
  RouteMatch m;
  for (size_t i = 0; i < table.size(); ++i) {
    if (!path_matches(table[i], segments)) continue;
    m.path_known = true;
    if (table[i].method != method) continue;
    m.route = i;
    for (size_t s = 0; s < segments.size(); ++s) {
      if (table[i].segments[s] == "{}") m.captures.push_back(segments[s]);
    }
    return m;
  }
  return m;
}

}  // namespace harvest::api
