// What a mapping function sees of a message (CON-3).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <harvest/common/ids.hpp>
#include <harvest/common/trace_context.hpp>
#include <harvest/connector/event_source.hpp>

namespace harvest::connector {

/// A read-only view of one received message. Borrowed: valid only during the
/// mapping call.
class MessageCtx {
 public:
  /// A view of `message`, received on `stream` and mapped by `binding`. Keeps
  /// references to all three, not copies: they must outlive the context.
  MessageCtx(const Message& message, const std::string& stream, const std::string& binding)
      : message_(message), stream_(stream), binding_(binding) {}

  /// The raw record key, if the broker has one (Kafka).
  [[nodiscard]] const std::optional<std::string>& key() const { return message_.key; }
  /// The key as text: present only when a key exists and is valid UTF-8.
  [[nodiscard]] std::optional<std::string_view> key_str() const;
  /// The first Kafka header / SQS message attribute named `name`.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
  /// Where the message sits: Kafka topic, partition and offset, or SQS queue
  /// URL, MessageId and receipt handle.
  [[nodiscard]] const Coordinates& coordinates() const { return message_.coordinates; }
  /// The stream the message was received on.
  [[nodiscard]] const std::string& stream() const { return stream_; }
  /// The name of the binding whose mapper is running.
  [[nodiscard]] const std::string& binding() const { return binding_; }
  /// How many times the broker has handed the message out (SQS
  /// ApproximateReceiveCount); 1 where the broker does not say (Kafka).
  [[nodiscard]] int receive_count() const { return message_.receive_count; }

 private:
  const Message& message_;
  const std::string& stream_;
  const std::string& binding_;
};

/// The producer's W3C trace context: the `traceparent` (and `tracestate`)
/// Kafka header or SQS message attribute, names matched without regard to
/// case. Absent, malformed, or given more than once: none (the message is
/// dispatched all the same). Several tracestate values are joined with ",",
/// as the recommendation combines repeated headers.
[[nodiscard]] std::optional<TraceContext> trace_context_of(const Message& message);

using harvest::is_valid_utf8;

}  // namespace harvest::connector
