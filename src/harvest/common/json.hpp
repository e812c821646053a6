// JSON with limits enforced while reading: every JSON text harvest parses
// from outside (HTTP bodies, broker payloads before mapping) goes through
// `parse_json`, so nesting depth and size are checked before any value is
// built, and every JSON value harvest is about to store can be checked with
// `check_json_depth` (a deeper value would overflow the stack of whoever
// serialises it, PostgreSQL's jsonb included).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest {

using Json = nlohmann::json;

/// Bounds `parse_json` enforces on JSON text from outside, checked while
/// reading, before any value is built. A plain value.
struct JsonLimits {
  /// Deepest nesting of arrays/objects accepted ({"a":[1]} is depth 2).
  /// Default 128.
  size_t max_depth = 128;
  /// Largest text accepted, in bytes. Default 1 MiB.
  size_t max_bytes = 1 << 20;
};

/// The documented defaults (kDefaultJsonLimits.max_depth == 128).
inline constexpr JsonLimits kDefaultJsonLimits{};

/// Parses `text`. Errors (kBadRequest) name what was wrong: malformed JSON
/// (with the position), nesting deeper than max_depth, or text longer than
/// max_bytes. Never recurses on the input: a hostile document cannot exhaust
/// the stack.
[[nodiscard]] Result<Json> parse_json(std::string_view text, const JsonLimits& limits = {});

/// kBadRequest when `value` nests deeper than `max_depth`. Iterative.
[[nodiscard]] Status check_json_depth(const Json& value, size_t max_depth = 128);

/// kBadRequest when a string or key of `value` contains U+0000, which
/// PostgreSQL's jsonb cannot store.
[[nodiscard]] Status check_json_storable(const Json& value, size_t max_depth = 128);

}  // namespace harvest
