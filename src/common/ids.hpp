// Identifiers and hashing.
#pragma once

#include <string>
#include <string_view>

namespace harvest {

// A random (version 4) UUID in canonical text form.
[[nodiscard]] std::string new_uuid();

// Lower-case hex SHA-256 of `data`.
[[nodiscard]] std::string sha256_hex(std::string_view data);

// A short, stable identity for this process (host:pid:random), used as a
// lease owner.
[[nodiscard]] std::string process_identity();

}  // namespace harvest
