// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// and `tracestate` a producer puts on a Kafka record header or an SQS message
// attribute, kept with the start it causes so the run links back to the
// producer's trace.
//
// Validation follows the recommendation's receiver rules: a traceparent that
// does not parse is ignored (the run simply has no trace context, it is never
// a reason to refuse the message), and a tracestate is kept only beside a
// valid traceparent and only within its limits.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <harvest/common/json.hpp>

namespace harvest {

/// The W3C trace context a message carried: a valid traceparent and, when it
/// came with one that is kept, its tracestate. A plain value; built by
/// `parse_trace_context` or `trace_context_from_json`.
struct TraceContext {
  std::string traceparent;                ///< "00-<trace-id>-<parent-id>-<flags>", lower-case hex
  std::optional<std::string> tracestate;  ///< opaque vendor list, at most kMaxTraceState bytes

  /// The 32 hex digits of the trace id (characters 3..34 of the traceparent).
  /// A view into `traceparent`: valid while this context lives unchanged.
  [[nodiscard]] std::string_view trace_id() const;
  /// Member-wise equality.
  bool operator==(const TraceContext&) const = default;
};

/// Longest tracestate kept: the recommendation's 32 list members in 512 bytes.
inline constexpr size_t kMaxTraceState = 512;
/// Longest traceparent accepted: version 00 is 55 bytes; later versions may
/// append fields, bounded here.
inline constexpr size_t kMaxTraceParent = 256;

/// The context named by these two header values, or nullopt when the
/// traceparent is absent or malformed (version "ff", wrong lengths, upper-case
/// or non-hex digits, an all-zero trace or parent id). A tracestate that is
/// too long or holds bytes outside printable ASCII is dropped, keeping the
/// traceparent.
[[nodiscard]] std::optional<TraceContext> parse_trace_context(
    std::optional<std::string_view> traceparent, std::optional<std::string_view> tracestate);

/// {"traceparent": ..., "tracestate": ...} (tracestate omitted when absent),
/// and back; from_json answers nullopt for null or a value that does not parse.
[[nodiscard]] Json to_json(const TraceContext& trace);
/// The inverse of `to_json`, validated as `parse_trace_context` validates:
/// nullopt for null, a non-object, or a missing or malformed traceparent; a
/// tracestate that is not a string or not valid is dropped.
[[nodiscard]] std::optional<TraceContext> trace_context_from_json(const Json& j);

}  // namespace harvest
