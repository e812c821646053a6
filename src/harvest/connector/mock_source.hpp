// An in-memory EventSource for users' tests (CON-15).
//
// Models either broker shape:
// - kPositional (Kafka-like, the default): `push_kafka` delivers records with
//   exact coordinates (push the same offset twice for a redelivery); ack
//   records a committed offset per partition; abandon does nothing and
//   `abandon_redelivers()` is false; `recover()` (unless disabled)
//   redelivers every pushed record at or above each partition's commit.
// - kRedelivering (SQS-like): `push_sqs` enqueues messages; ack deletes;
//   abandon puts a message straight back with its receive count raised;
//   `expire_in_flight()` plays a lapsed visibility timeout.
// Everything acked and abandoned is recorded. Thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <harvest/common/clock.hpp>
#include <harvest/connector/event_source.hpp>

namespace harvest::connector {

/// An in-memory EventSource playing a Kafka-like or SQS-like broker (see the
/// file comment). receive() never waits: an empty queue is an idle poll at
/// once. Lifecycle: build it (std::make_shared, to hand to a binding),
/// configure it, push messages before or while a runtime consumes it, then
/// inspect the records. Thread-safety: every method takes one internal mutex,
/// so a test may push and inspect while the runtime's threads receive, ack and
/// sample lag. Ownership: keeps a copy of every message pushed (positional:
/// for replay by recover()), acked and abandoned, for its whole lifetime.
class MockSource final : public EventSource {
 public:
  /// Which broker shape the mock plays.
  enum class Kind {
    kPositional,   ///< Kafka-like: offsets and commits; abandon does not redeliver.
    kRedelivering  ///< SQS-like: ack deletes; abandon redelivers at once.
  };
  /// Kafka headers / SQS message attributes, as name-value pairs in order.
  using Headers = std::vector<std::pair<std::string, std::string>>;

  /// A source for `stream` (also the Kafka topic of pushed records), reporting
  /// the subscription identity `"mock:<stream>"` unless subscription() changes it.
  explicit MockSource(std::string stream, Kind kind = Kind::kPositional);

  /// Positional kind only: queues a record at `partition`/`offset`, stamped
  /// with the partition's current generation. Pushing an offset again plays a
  /// redelivery, and replaces the record recover() replays at that offset.
  void push_kafka(int32_t partition, int64_t offset, std::string payload,
                  std::optional<std::string> key = std::nullopt, Headers headers = {});
  /// Redelivering kind only: queues a message (its receive count becomes 1 on
  /// the first receive). `message_id` defaults to a generated `"mock-<n>"`.
  /// Returns the MessageId.
  std::string push_sqs(std::string payload, Headers attributes = {},
                       std::optional<std::string> message_id = std::nullopt);

  /// Ownership (positional): the partition is assigned anew (later pushes
  /// carry a new generation), or revoked (owns() is false for it).
  MockSource& reassign(int32_t partition);
  /// owns() answers false for `partition` until the next reassign().
  MockSource& revoke(int32_t partition);
  [[nodiscard]] bool owns(const std::string& topic, int32_t partition,
                          uint64_t generation) const override;

  /// Configuration (call before use). The subscription identity reported
  /// (default `"mock:<stream>"`); mocks given one identity count as one
  /// physical subscription (see EventSource::subscription_identity).
  MockSource& subscription(std::string identity);
  /// The dead-letter destination reported (default none); a binding using
  /// broker_native_dead_letter() needs one.
  MockSource& dead_letter_destination(std::optional<std::string> destination);
  /// The cluster id reported (default none: nothing to check), to play a
  /// binding pointed at another cluster (cluster_identity.hpp).
  MockSource& cluster_id(std::optional<std::string> id);
  /// The redrive policy's maxReceiveCount this source reports (default none).
  MockSource& redrive_max_receives(std::optional<int> receives);
  /// Whether recover() rebuilds (default true). false: recover() answers false,
  /// as a source that cannot rebuild itself. The redelivering kind never does.
  MockSource& recoverable(bool can_recover);
  /// The next `count` recover() calls fail with a transient error (a broker
  /// that cannot be reached while the consumer is rebuilt).
  MockSource& fail_recoveries(int count);
  /// While true, ack() fails with a transient error and records nothing.
  MockSource& fail_acks(bool fail);
  /// How long lag() sleeps (on clock()) before answering, to play a slow
  /// broker; past the deadline it then answers std::nullopt. Default 0.
  MockSource& lag_delay(std::chrono::milliseconds delay);
  /// The clock lag() sleeps and reads deadlines on: give it the runtime's
  /// (ConnectorRuntimeConfig::clock). Default: the process clock.
  MockSource& clock(std::shared_ptr<Clock> clock);
  /// The answer lag() gives instead of computing one. Default: computed —
  /// positional: records from each partition's commit (or its first record)
  /// to its last; redelivering: queued plus received-but-unacked messages.
  MockSource& fixed_lag(std::optional<int64_t> lag);
  /// lag() answers at once that the broker could not answer in time
  /// (std::nullopt), as a source does when its broker calls time out.
  MockSource& lag_unanswered(bool unanswered);
  /// Overrides what abandon_redelivers() reports (default: by kind).
  MockSource& abandon_redelivers(bool redelivers);

  /// Redelivering kind: every received-but-unacked message becomes visible again.
  void expire_in_flight();

  /// Records. Every message given to a successful ack(), in call order.
  [[nodiscard]] std::vector<Message> acked() const;
  /// Every message given to abandon(), in call order.
  [[nodiscard]] std::vector<Message> abandoned() const;
  /// Positional: the committed offset of `partition` (the offset after the
  /// last acked record), or none if no ack covered it.
  [[nodiscard]] std::optional<int64_t> committed(int32_t partition) const;
  [[nodiscard]] size_t pending() const;        ///< queued, not yet received
  [[nodiscard]] int recoveries() const;        ///< successful rebuilds
  [[nodiscard]] int recover_attempts() const;  ///< every recover() call
  [[nodiscard]] int lag_calls() const;         ///< every lag() call, answered or not

  /// EventSource.
  [[nodiscard]] Result<std::vector<Message>> receive(size_t max,
                                                     std::chrono::milliseconds timeout) override;
  [[nodiscard]] Status ack(const std::vector<Message>& messages) override;
  [[nodiscard]] Status abandon(const std::vector<Message>& messages) override;
  [[nodiscard]] bool abandon_redelivers() const override;
  [[nodiscard]] std::optional<std::string> dead_letter_destination() const override;
  [[nodiscard]] std::optional<std::string> cluster_id() const override;
  [[nodiscard]] std::optional<int> redrive_max_receives() const override;
  [[nodiscard]] Result<bool> recover() override;
  [[nodiscard]] Result<std::optional<int64_t>> lag(
      std::chrono::steady_clock::time_point deadline) override;
  [[nodiscard]] std::string subscription_identity() const override;
  [[nodiscard]] std::string stream() const override { return stream_; }

 private:
  std::string stream_;
  Kind kind_;
  mutable std::mutex mu_;
  std::deque<Message> queue_;
  std::map<std::string, Message> in_flight_;           ///< redelivering: by MessageId
  std::map<int32_t, std::map<int64_t, Message>> log_;  ///< positional: every pushed record
  std::map<int32_t, int64_t> committed_;
  std::map<int32_t, uint64_t> generation_;  ///< partition -> current assignment
  std::set<int32_t> revoked_;
  std::vector<Message> acked_, abandoned_;
  std::string subscription_;
  std::optional<std::string> dlq_;
  std::optional<std::string> cluster_id_;
  std::optional<int> max_receives_;
  bool recoverable_ = true;
  bool fail_acks_ = false;
  std::chrono::milliseconds lag_delay_{0};
  std::shared_ptr<Clock> clock_ = Clock::steady();
  std::optional<int64_t> fixed_lag_;
  bool lag_unanswered_ = false;
  std::optional<bool> redelivers_;
  int recoveries_ = 0;
  int recover_attempts_ = 0;
  int failing_recoveries_ = 0;
  int lag_calls_ = 0;
  int next_id_ = 0;
};

}  // namespace harvest::connector
