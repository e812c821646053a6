// KafkaSource: the EventSource over a Kafka consumer group (librdkafka).
//
//   auto source = KafkaSource::connect(
//       KafkaSourceConfig(brokers, "harvest-orders", "orders.placed")
//           .property("auto.offset.reset", "earliest"));
//
// What it adds to a plain librdkafka consumer (KAF-1..KAF-5):
// - Offsets are committed only for what the runtime acks: auto-commit is
//   forced off, `ack` commits offset+1 of the head it is given per partition.
// - Ownership: every assignment of a partition gets a fresh generation,
//   stamped on the messages read under it. An ack whose partition is no
//   longer owned, or whose generation is not the current one, is dropped —
//   neither librdkafka nor the broker checks partition ownership on commit,
//   so a late ack could otherwise rewind a partition another member moved on.
//   On revocation the acked prefix of the revoked partitions is committed
//   synchronously before they are handed back. Eager and cooperative
//   assignors are both supported.
// - `recover()` commits the anchors, then closes and rebuilds the consumer so
//   it rejoins from the last commit (the cure for a wedged prefix, CON-7).
// - Latest anchoring: the first offset read per partition is pinned (see
//   anchor_book.hpp); under `auto.offset.reset=latest` it is committed eagerly
//   before the batch that revealed it is returned.
// - `lag()` sums, over every partition of the topic (from metadata, not the
//   assignment), high watermark minus the group's committed offset, under an
//   overall deadline, on a separate librdkafka handle.
//
// Threading. The runtime calls receive/ack/abandon/recover/close from one
// thread (its consumer thread). The source owns one poller thread per
// consumer incarnation, which calls librdkafka's consume() every 100 ms
// whatever the runtime is doing: it fills a bounded read-ahead buffer,
// pauses the assigned partitions when the buffer is full and resumes them at
// half, and runs the rebalance and commit callbacks. Because librdkafka is
// polled continuously, a slow batch never lets `max.poll.interval.ms` expire
// and never stalls a rebalance; the runtime's own pace is the backpressure.
// `lag()` may be called from any thread, concurrently with the rest: it uses
// its own consumer handle (created on first use, never subscribed) and
// shares only a snapshot of the anchors.
//
// Ownership: `connect` returns a shared_ptr because the application and the
// connector runtime both hold the source (EventSource is shared by the spec).
// The destructor stops the poller, leaves the group (committing the acked
// prefix of what it owned) and closes both handles.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/kafka/kafka_source_config.hpp>

namespace RdKafka {
class KafkaConsumer;
}

namespace harvest {
class DeadlineMutex;  // <harvest/common/deadline_mutex.hpp>, internal
}  // namespace harvest

namespace harvest::kafka {

class AnchorBook;  // <harvest/kafka/anchor_book.hpp>, internal

/// The EventSource over one topic of a Kafka consumer group (see the file
/// comment for what it adds to a plain consumer). Lifecycle: connect() creates
/// it; the first receive() joins the group; recover() rebuilds the consumer;
/// close() or the destructor leaves the group. Thread-safety: one runtime
/// thread drives it, lag() and snapshot() may be called from any thread.
/// Ownership: shared (std::shared_ptr) by the application and the runtime; it
/// owns its poller thread and librdkafka handles.
class KafkaSource final : public connector::EventSource {
 public:
  /// Validates the properties with librdkafka, creates the consumer and asks
  /// the brokers for metadata (up to 10 s); does not join the group: the
  /// subscription starts with the first `receive`. The properties in the
  /// file named by `HARVEST_KAFKA_PROPERTIES_FILE`, if set (`key=value`
  /// lines, as managed Kafka services hand them out: TLS, SASL), are applied
  /// after `config`'s own. Errors: kConfig naming the rejected property (never
  /// its value), a properties file that cannot be read or parsed (naming its
  /// line), or brokers that refuse the connection's TLS or SASL (a wrong CA,
  /// an expired certificate, a wrong password) — never retried, since they
  /// do not heal. Brokers that do not answer at all are not an error: the
  /// source consumes once they do. Forced settings that the caller tried to
  /// change are logged as warnings. `config` is copied.
  [[nodiscard]] static Result<std::shared_ptr<KafkaSource>> connect(
      const KafkaSourceConfig& config);

  ~KafkaSource() override;
  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;

  /// Up to `max` read-ahead messages, waiting at most `timeout` for the first.
  /// Joins the group on first use. Under `latest`, commits the floor of newly
  /// anchored partitions before returning (a failed commit is logged and
  /// retried on the next call; the batch is still returned). Errors: a fatal
  /// librdkafka error (kTransient, reported once; the consumer is rebuilt),
  /// or the latest consumer error (unknown topic: kConfig; broker unreachable:
  /// kTransient) when no message is ready.
  [[nodiscard]] Result<std::vector<connector::Message>> receive(
      size_t max, std::chrono::milliseconds timeout) override;

  /// Commits (asynchronously) offset+1 of the highest given message per
  /// partition, for messages whose generation is the partition's current one;
  /// the rest are dropped with an info log. Commit failures arrive later and
  /// are logged by the commit callback. Errors: a message that is not from
  /// this source's topic (kBadRequest).
  [[nodiscard]] Status ack(const std::vector<connector::Message>& messages) override;

  /// Kafka has no negative acknowledgement: not committing is the hand-back.
  [[nodiscard]] Status abandon(const std::vector<connector::Message>&) override { return {}; }
  [[nodiscard]] bool abandon_redelivers() const override { return false; }

  /// Commits the anchors of the partitions still owned (only where they
  /// strictly raise the group's commit) synchronously, then closes the
  /// consumer and starts a new one, which rejoins from the last commit.
  /// Returns true when rebuilt; an error (nothing rebuilt) when the anchor
  /// commit or the new consumer fails, so the runtime backs off and retries.
  [[nodiscard]] Result<bool> recover() override;

  /// Whether `partition` is assigned to this consumer under `generation`.
  [[nodiscard]] bool owns(const std::string& topic, int32_t partition,
                          uint64_t generation) const override;
  /// Group-wide work owed: Σ over all partitions of the topic of high
  /// watermark − baseline, where the baseline is the group's committed offset,
  /// else this process's anchor, else the reset policy's end of the log (low
  /// watermark for earliest, high for latest). std::nullopt when the broker
  /// does not answer by `deadline`. Errors: unknown topic (kConfig), other
  /// broker refusals.
  [[nodiscard]] Result<std::optional<int64_t>> lag(
      std::chrono::steady_clock::time_point deadline) override;

  [[nodiscard]] std::string subscription_identity() const override { return identity_; }
  [[nodiscard]] std::string stream() const override { return config_.topic(); }
  /// The cluster id the brokers reported at connect; none when no broker
  /// answered then.
  [[nodiscard]] std::optional<std::string> cluster_id() const override {
    return cluster_id_.empty() ? std::nullopt : std::optional<std::string>(cluster_id_);
  }

  /// Stops consuming and leaves the group; later calls to receive fail.
  /// Idempotent; the destructor calls it.
  void close();

  /// What the source currently believes, for diagnostics and tests.
  struct Snapshot {
    /// Owned partition -> its current generation.
    std::map<int32_t, uint64_t> owned;
    /// Partition -> anchor (first offset read, raised by every ack).
    std::map<int32_t, int64_t> anchors;
    /// Latest partitions whose floor has been committed eagerly.
    std::set<int32_t> floors_committed;
    /// Messages in the read-ahead buffer, not yet returned by receive().
    size_t buffered = 0;
    /// Whether the poller has paused the assigned partitions (read-ahead full).
    bool paused = false;
  };
  /// A consistent copy of that state, taken under the source's lock.
  [[nodiscard]] Snapshot snapshot() const;

 private:
  class Session;
  /// The current session's consumer (a session must exist).
  RdKafka::KafkaConsumer& session_consumer();
  struct Passkey {};

 public:
  /// For connect() only (the Passkey is private; public for make_shared):
  /// stores the config and derives its identity, creating no consumer.
  KafkaSource(Passkey, KafkaSourceConfig config);

 private:
  /// Called from the rebalance callback (poller thread, or the closing
  /// thread while draining).
  void on_assigned(const std::vector<int32_t>& partitions);
  void on_revoked(RdKafka::KafkaConsumer& consumer, const std::vector<int32_t>& partitions,
                  bool lost);
  /// Called by the poller.
  void on_message(int32_t partition, int64_t offset, connector::Message message);
  void on_partition_eof(int32_t partition, int64_t offset);
  void on_consumer_error(Error error, bool fatal);
  [[nodiscard]] bool fetch_paused() const;
  /// With mu_ held: the read-ahead is at either bound / at or below half of both.
  [[nodiscard]] bool read_ahead_full() const;
  [[nodiscard]] bool read_ahead_half() const;
  /// With mu_ held: drops buffered messages of `partitions`.
  void drop_buffered(const std::vector<int32_t>& partitions);

  [[nodiscard]] Status ensure_session();
  /// Commits the anchors of `partitions` that pass select_anchor_commits.
  /// Returns the partitions whose floor is now durable (committed here, or
  /// already at or below the group's commit).
  [[nodiscard]] Result<std::set<int32_t>> commit_anchors(const std::set<int32_t>& partitions);
  void commit_pending_floors();
  /// After a fatal librdkafka error the consumer is unusable and its
  /// membership gone: drop what it held and start a fresh one.
  void rebuild_after_fatal();
  [[nodiscard]] Status ensure_lag_handle();

  const KafkaSourceConfig config_;
  const std::map<std::string, std::string> properties_;
  const std::string identity_;
  /// "KafkaSource#<n> <identity>": tells replicas in one process apart in logs.
  const std::string log_name_;
  const OffsetReset reset_;

  /// Guards every field below it up to commit_mu_.
  mutable std::mutex mu_;
  std::condition_variable ready_;  ///< buffer_ non-empty, or an error to report
  struct Ownership {
    uint64_t generation = 0;
    /// Offset after the last acked message under this generation.
    std::optional<int64_t> acked_next;
    /// The last offset read under this generation: offsets only grow within
    /// one, unless the partition's log was replaced (on_message).
    std::optional<int64_t> last_read;
  };
  std::map<int32_t, Ownership> owned_;
  std::deque<connector::Message> buffer_;
  size_t buffer_bytes_ = 0;        ///< footprint of buffer_ (read-ahead bound)
  std::condition_variable space_;  ///< buffer_ shrank
  std::unique_ptr<AnchorBook> anchors_;
  std::set<int32_t> floors_committed_;  ///< latest: once per partition per process
  uint64_t next_generation_ = 0;
  bool paused_ = false;
  bool closed_ = false;
  std::optional<Error> fatal_;
  std::optional<Error> consumer_error_;
  std::string cluster_id_;  ///< set once by connect(); empty when unknown

  /// Orders "check ownership, then commit" in ack/commit_anchors against the
  /// revocation in the rebalance callback, so a commit decided under an old
  /// ownership cannot be sent after the partition was handed back. Taken
  /// before mu_, never after it.
  std::mutex commit_mu_;

  /// The live consumer incarnation. Touched only by the runtime's thread.
  std::unique_ptr<Session> session_;

  /// lag()'s own handle, created on first use. Serialised by lag_mu_ (timed,
  /// so a second sampler gives up at its deadline rather than queueing).
  std::unique_ptr<DeadlineMutex> lag_mu_;
  std::unique_ptr<RdKafka::KafkaConsumer> lag_handle_;
};

}  // namespace harvest::kafka
