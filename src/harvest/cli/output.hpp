// What every `harvest` command prints with: aligned tables, one-line
// excerpts and the one-line `error: ...` form scripts can rely on.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>

namespace harvest::cli {

// Prints rows under a header, each column as wide as its widest cell.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);
// The value, or "-" when absent or empty.
[[nodiscard]] std::string or_dash(const std::optional<std::string>& v);
// One line of at most `max` characters (errors can span lines).
[[nodiscard]] std::string one_line(std::string s, size_t max);
// The environment variable `name`, or `fallback` when it is unset or empty.
[[nodiscard]] std::string env_or(const char* name, std::string fallback = {});
// Who a command acts for when no --by / --requested-by is given: "cli:$USER".
[[nodiscard]] std::string default_requester();
// Prints `error: <message>` on one line; returns exit code 1.
[[nodiscard]] int fail_with(std::ostream& err, const Error& e);

}  // namespace harvest::cli
