// Identifiers and hashing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace harvest {

/// A random (version 4) UUID in canonical text form.
[[nodiscard]] std::string new_uuid();
/// A time-ordered (version 7, RFC 9562) UUID: 48 bits of Unix milliseconds,
/// then 74 random bits. Execution ids use it, so the btree indexes keyed on
/// them grow at their right edge instead of touching a random page per row.
/// Not for tokens cut to a prefix: the first 12 hex digits are the time.
[[nodiscard]] std::string new_time_ordered_uuid();

/// Whether `s` is a UUID in canonical text form (8-4-4-4-12 hex digits).
[[nodiscard]] bool is_uuid(std::string_view s);

/// Lower-case hex SHA-256 of `data`.
[[nodiscard]] std::string sha256_hex(std::string_view data);
/// The first 64 bits of SHA-256 over `parts`, each prefixed by its length (so
/// no two different lists hash the same bytes), read big-endian as a signed
/// integer (it fits a PostgreSQL bigint). Hashes the parts where they lie: no
/// copy is made.
[[nodiscard]] int64_t digest64(std::span<const std::string_view> parts);

/// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or code points
/// past U+10FFFF).
[[nodiscard]] bool is_valid_utf8(std::string_view s);

/// `s` with every ill-formed byte replaced by U+FFFD: safe for a text column
/// or a JSON string, whatever bytes a broker handed us.
[[nodiscard]] std::string to_valid_utf8(std::string_view s);

/// A short identity for this process (host:pid:random, the random part 8 hex
/// digits), used as a lease owner. Each call draws a new random part, so a
/// caller keeps the value it was given rather than calling again.
[[nodiscard]] std::string process_identity();

}  // namespace harvest
