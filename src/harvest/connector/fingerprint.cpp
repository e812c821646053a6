#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/ids.hpp>
#include <harvest/connector/fingerprint.hpp>

namespace harvest::connector {

std::optional<int64_t> record_fingerprint(const Message& m) {
  if (!position_of(m.coordinates)) return std::nullopt;
  // Presence flags keep "no key" apart from an empty key, and "no
  // timestamp" apart from any value.
  const std::string timestamp = m.timestamp_ms ? std::to_string(*m.timestamp_ms) : std::string();
  std::vector<std::string_view> parts;
  parts.reserve(5 + 2 * m.headers.size());
  parts.emplace_back(m.key ? "k" : "-");
  parts.emplace_back(m.key ? std::string_view(*m.key) : std::string_view());
  parts.emplace_back(m.payload);
  parts.emplace_back(m.timestamp_ms ? std::string_view("t") : std::string_view("-"));
  parts.emplace_back(timestamp);
  for (const auto& [name, value] : m.headers) {
    parts.emplace_back(name);
    parts.emplace_back(value);
  }
  return digest64(parts);
}

}  // namespace harvest::connector
