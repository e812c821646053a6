#include <algorithm>

#include <harvest/common/trace_context.hpp>

namespace harvest {
namespace {

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

// version "-" trace-id "-" parent-id "-" flags, each lower-case hex of 2, 32,
// 16 and 2 digits. Version 00 ends there; a later version may go on after
// another "-".
bool valid_traceparent(std::string_view t) {
  if (t.size() < 55 || t.size() > kMaxTraceParent) return false;
  if (t[2] != '-' || t[35] != '-' || t[52] != '-') return false;
  const auto version = t.substr(0, 2), trace_id = t.substr(3, 32), parent_id = t.substr(36, 16),
             flags = t.substr(53, 2);
  if (!lower_hex(version) || !lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags)) {
    return false;
  }
  if (version == "ff" || all_zero(trace_id) || all_zero(parent_id)) return false;
  if (version == "00") return t.size() == 55;
  return t.size() == 55 || t[55] == '-';
}

bool valid_tracestate(std::string_view s) {
  return !s.empty() && s.size() <= kMaxTraceState &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

std::string_view TraceContext::trace_id() const {
  return std::string_view(traceparent).substr(3, 32);
}

std::optional<TraceContext> parse_trace_context(std::optional<std::string_view> traceparent,
                                                std::optional<std::string_view> tracestate) {
  if (!traceparent || !valid_traceparent(*traceparent)) return std::nullopt;
  TraceContext out{.traceparent = std::string(*traceparent), .tracestate = std::nullopt};
  if (tracestate && valid_tracestate(*tracestate)) out.tracestate = std::string(*tracestate);
  return out;
}

Json to_json(const TraceContext& trace) {
  Json j = {{"traceparent", trace.traceparent}};
  if (trace.tracestate) j["tracestate"] = *trace.tracestate;
  return j;
}

std::optional<TraceContext> trace_context_from_json(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto parent = j.find("traceparent");
  if (parent == j.end() || !parent->is_string()) return std::nullopt;
  std::optional<std::string_view> state;
  auto s = j.find("tracestate");
  if (s != j.end() && s->is_string()) state = s->get_ref<const std::string&>();
  return parse_trace_context(parent->get_ref<const std::string&>(), state);
}

}  // namespace harvest
