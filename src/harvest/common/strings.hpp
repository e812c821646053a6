// Small string helpers every module shares (ASCII-only by design: they serve
// protocol tokens, header names and configuration keys, never user text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace harvest {

// `s` with ASCII letters lower-cased; other bytes unchanged.
[[nodiscard]] std::string ascii_lower(std::string_view s);

// `s` without leading and trailing spaces, tabs, CR and LF.
[[nodiscard]] std::string_view trim(std::string_view s);

// The non-empty, trimmed items of a `separator`-separated list
// ("a, b,,c" -> {"a", "b", "c"}).
[[nodiscard]] std::vector<std::string> split_list(std::string_view list, char separator = ',');

// Whether `s` is an RFC 3339 timestamp with a real date and time, such as
// 2026-12-04T06:00:00Z or 2026-12-04 06:00:00.5+01:00: checked before a
// filter reaches SQL, so a bad value is a 400 naming the field, never a
// database error.
[[nodiscard]] bool is_timestamp(const std::string& s);

}  // namespace harvest
