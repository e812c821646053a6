// Request-target handling for the HTTP API, independent of the HTTP library:
// splitting and percent-decoding the path, parsing the query string, and
// matching a route table whose patterns are literal segments and `{}`
// captures. Internal to harvest_api.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/error.hpp>

namespace harvest::api {

// A request target split into its decoded path segments and query.
struct Target {
  std::vector<std::string> segments;  // "/a/b%20c" -> {"a", "b c"}
  // The first value of each query parameter ('+' and %XX decoded).
  std::map<std::string, std::string, std::less<>> query;
};

// Parses an origin-form target ("/path?query"). kBadRequest names what is
// wrong: not starting with '/', a malformed %-escape. A segment whose
// decoding holds '/' is kept as is (no route segment matches it).
[[nodiscard]] Result<Target> parse_target(std::string_view target);

// `s` with %XX escapes decoded (and '+' as a space when `plus_is_space`);
// std::nullopt for a malformed escape.
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

enum class Method { kGet, kPost, kOther };

struct RoutePattern {
  Method method;
  // Segments of the path: a literal, or "{}" for a capture.
  std::vector<std::string> segments;
};

// Splits "/workflows/{}/start" into a pattern for `method`.
[[nodiscard]] RoutePattern route_pattern(Method method, std::string_view pattern);

struct RouteMatch {
  // Index into the table of the route that matched; std::nullopt when none.
  std::optional<size_t> route;
  // Some route has this path under another method (answer 405, not 404).
  bool path_known = false;
  std::vector<std::string> captures;
};

// The first route of `table` whose method and segments match. A capture
// matches any non-empty segment without '/'.
[[nodiscard]] RouteMatch match_route(const std::vector<RoutePattern>& table, Method method,
                                     const std::vector<std::string>& segments);

}  // namespace harvest::api
