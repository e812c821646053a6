#include <fmt/format.h>

#include <harvest/common/ids.hpp>
#include <harvest/connector/dedupe_key.hpp>

namespace harvest::connector {

namespace {

void append(std::string& out, std::string_view part) {
  // <length>:<bytes> — a reader always knows where a component ends, so two
  // different component lists can never produce the same string.
  out += std::to_string(part.size());
  out += ':';
  out += part;
}

}  // namespace

DedupeKey DedupeKey::derive(const std::string& binding, const std::string& incarnation,
                            const Coordinates& coordinates) {
  return from_components(binding, incarnation, identity_components(coordinates));
}

DedupeKey DedupeKey::derive_fingerprinted(const std::string& binding,
                                          const std::string& incarnation,
                                          const Coordinates& coordinates, int64_t fingerprint) {
  // One component more than any coordinate key of the same kind has, so the
  // encodings cannot alias.
  auto parts = identity_components(coordinates);
  parts.push_back(fmt::format("fp:{:016x}", static_cast<uint64_t>(fingerprint)));
  return from_components(binding, incarnation, parts);
}

DedupeKey DedupeKey::from_components(const std::string& binding, const std::string& incarnation,
                                     const std::vector<std::string>& parts) {
  std::string body;
  append(body, binding);
  append(body, incarnation);
  for (const auto& part : parts) append(body, part);
  // "conn:1:" (inline) and "conn:h:" (hashed) never alias each other. Only
  // text PostgreSQL stores exactly stays inline: a NUL would be truncated by
  // libpq (two keys collapsing into one) and invalid UTF-8 refused.
  const bool storable = body.find('\0') == std::string::npos && is_valid_utf8(body);
  if (body.size() <= kMaxInline && storable) return DedupeKey("conn:1:" + body);
  return DedupeKey("conn:h:" + sha256_hex(body));
}

}  // namespace harvest::connector
