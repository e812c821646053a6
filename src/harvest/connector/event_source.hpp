// The broker boundary: what the connector runtime needs from a message source.
//
// One interface, three implementations: MockSource (in memory, for users'
// tests), KafkaSource (librdkafka) and SqsSource (the SQS JSON protocol).
// The same contract test suite runs against each (tests/connector/
// event_source_contract.hpp).
//
// Threading: the runtime calls receive/ack/abandon/recover from its consumer
// thread only; `lag()` may be called from the runtime's lag-sampler thread
// concurrently with them, so implementations must make it safe to do so.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/connector/coordinates.hpp>

namespace harvest::connector {

/// One message as a source hands it to the runtime, broker-independent. A
/// plain value: the runtime keeps its copy while dispatching and passes it back
/// unchanged to ack() or abandon().
struct Message {
  /// Where the message sits (Kafka topic/partition/offset, SQS queue URL,
  /// MessageId and receipt handle): what ack/abandon act on, and what the
  /// dedupe key is derived from.
  Coordinates coordinates;
  /// Raw record key (Kafka); SQS messages have none.
  std::optional<std::string> key;
  /// Kafka headers / SQS string message attributes, in broker order.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The raw body, byte for byte.
  std::string payload;
  /// How many times the broker has handed this message out (SQS
  /// ApproximateReceiveCount); 1 where the broker does not say.
  int receive_count = 1;
  /// Opaque ownership token set by the source at receive time (Kafka: the
  /// assignment generation of the partition). Passed back unchanged on ack so
  /// the source can drop acks for partitions it no longer owns.
  uint64_t generation = 0;
  /// The record's timestamp in Unix milliseconds, as the broker stores it
  /// (Kafka CreateTime or LogAppendTime); unset where the broker gives none.
  /// Part of the record's fingerprint (fingerprint.hpp).
  std::optional<int64_t> timestamp_ms = std::nullopt;
};

/// The interface a message source implements for the connector runtime.
/// Lifecycle: the application builds a source (MockSource, KafkaSource::connect,
/// SqsSource::connect) and hands it to a binding; it lives until the last
/// shared_ptr (the application's or the runtime's) lets go. Thread-safety:
/// see the file comment — one consumer thread, plus lag() concurrently.
/// Ownership: shared (std::shared_ptr) between the application and the runtime.
class EventSource {
 public:
  virtual ~EventSource() = default;

  /// Up to `max` messages, waiting at most `timeout` for the first. An empty
  /// batch is an idle poll. Errors: transient (broker unreachable) or config.
  [[nodiscard]] virtual Result<std::vector<Message>> receive(size_t max,
                                                             std::chrono::milliseconds timeout) = 0;

  /// The runtime vouches that `messages` are durably owned by harvest.
  /// Positional sources (Kafka) commit, per partition, the offset after the
  /// highest message given; the runtime only passes the head of a contiguous
  /// completed prefix. Other sources delete each message.
  [[nodiscard]] virtual Status ack(const std::vector<Message>& messages) = 0;

  /// Hands messages back for prompt redelivery (SQS: visibility 0). A no-op
  /// where not acking is the only way to hand back (Kafka).
  [[nodiscard]] virtual Status abandon(const std::vector<Message>& messages) = 0;

  /// Whether `abandon` makes the broker deliver the message again by itself.
  /// false (Kafka): a message that is not acked blocks its partition's commit
  /// until the consumer is rebuilt.
  [[nodiscard]] virtual bool abandon_redelivers() const = 0;

  /// Where the broker moves messages it gives up on (SQS redrive target), if
  /// anywhere. Required by `broker_native_dead_letter()`.
  [[nodiscard]] virtual std::optional<std::string> dead_letter_destination() const {
    return std::nullopt;
  }
  /// How many receives the broker's redrive policy allows before it moves a
  /// message to that destination (SQS maxReceiveCount), when known. The
  /// runtime counts a message it hands back as dead-lettered once, on the
  /// hand-back after which the broker moves it; earlier ones are retries.
  [[nodiscard]] virtual std::optional<int> redrive_max_receives() const { return std::nullopt; }

  /// Positional sources (Kafka): whether this consumer still owns `partition`
  /// of `topic` under assignment `generation` (the `Message::generation` its
  /// messages carry). The runtime forgets the commit state of partitions it no
  /// longer owns, so a stall on a revoked partition never rebuilds the
  /// consumer. Default: true (sources without ownership). May be called from
  /// the consumer thread only.
  [[nodiscard]] virtual bool owns(const std::string& topic, int32_t partition,
                                  uint64_t generation) const {
    (void)topic;
    (void)partition;
    (void)generation;
    return true;
  }

  /// Custody of messages received ahead (SQS-5). A source that fetches the
  /// next batch while the runtime dispatches the current one (SQS
  /// receive-ahead) holds messages the runtime has not seen; the runtime
  /// takes them — to dispatch, or to release with `abandon` — before it
  /// pauses for a store outage, samples lag or stops, so no message sits
  /// invisible across those and no receive is spent on one that is not
  /// dispatched. `take_received_ahead` waits for a call still under way and
  /// makes no new broker call. Defaults: nothing is held ahead.
  [[nodiscard]] virtual bool holds_received_ahead() const { return false; }
  /// Hands over every message received ahead (empty when none), waiting for a
  /// call still under way; the caller must then dispatch or abandon them.
  [[nodiscard]] virtual std::vector<Message> take_received_ahead() { return {}; }

  /// Rebuilds the consumer so unacked messages are redelivered from the last
  /// commit. true: rebuilt. false: this source cannot rebuild itself (the
  /// default). An error: the rebuild failed and may be retried.
  [[nodiscard]] virtual Result<bool> recover() { return false; }

  /// Work this subscription still owes (uncommitted and in-flight messages),
  /// group-wide so replicas agree; std::nullopt when the broker cannot answer
  /// in time. Must return by `deadline`.
  [[nodiscard]] virtual Result<std::optional<int64_t>> lag(
      std::chrono::steady_clock::time_point deadline) = 0;

  /// The physical subscription: two bindings with the same identity would
  /// split (or double-consume) one stream. Kafka: canonical bootstrap list +
  /// group.id + topic; SQS: queue URL.
  [[nodiscard]] virtual std::string subscription_identity() const = 0;

  /// The logical stream name (topic, or the configured SQS stream name).
  [[nodiscard]] virtual std::string stream() const = 0;

  /// The stable identity of the cluster the source reads, when it has one
  /// and knew it at connect (Kafka: the cluster id every metadata response
  /// carries). Recorded per binding and key incarnation, so a binding
  /// pointed at another cluster refuses to start (cluster_identity.hpp).
  /// Default: none (nothing to check).
  [[nodiscard]] virtual std::optional<std::string> cluster_id() const { return std::nullopt; }
};

}  // namespace harvest::connector
