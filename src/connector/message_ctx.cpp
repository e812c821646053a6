#include "connector/message_ctx.hpp"

#include <fmt/format.h>

namespace harvest::connector {

std::string render(const Coordinates& c) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    return fmt::format("{}:{}:{}", k->topic, k->partition, k->offset);
  }
  const auto& s = std::get<SqsCoordinates>(c);
  return fmt::format("{}#{}", s.queue_url, s.message_id);
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      auto cc = static_cast<unsigned char>(s[i + j]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong encodings, surrogates and out-of-range code points.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      return false;
    }
    i += len;
  }
  return true;
}

std::optional<std::string_view> MessageCtx::key_str() const {
  if (!message_.key || !is_valid_utf8(*message_.key)) return std::nullopt;
  return std::string_view(*message_.key);
}

std::optional<std::string_view> MessageCtx::header(std::string_view name) const {
  for (const auto& [k, v] : message_.headers) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

}  // namespace harvest::connector
