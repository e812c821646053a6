#include <fmt/format.h>

#include <harvest/common/strings.hpp>
#include <harvest/connector/message_ctx.hpp>

namespace harvest::connector {

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

std::optional<TraceContext> trace_context_of(const Message& message) {
  std::optional<std::string_view> parent;
  std::optional<std::string> state;
  for (const auto& [k, v] : message.headers) {
    if (k.size() != 11 && k.size() != 10) continue;  // cheap: most headers are neither
    const std::string name = ascii_lower(k);
    if (name == "traceparent") {
      if (parent) return std::nullopt;  // two parents name no single trace
      parent = v;
    } else if (name == "tracestate") {
      // Bounded by the record's size; over kMaxTraceState it is dropped below.
      state = state ? *state + "," + v : v;
    }
  }
  return parse_trace_context(parent,
                             state ? std::optional<std::string_view>(*state) : std::nullopt);
}

}  // namespace harvest::connector
