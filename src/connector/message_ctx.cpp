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
