// Configuration of a KafkaSource and the physical subscription it names.
//
// `KafkaSourceConfig(brokers, group, topic).property(k, v)` carries any
// librdkafka property (SASL, TLS, fetch tuning) plus a few harvest knobs.
// `effective_properties()` is what the consumer is actually created with:
// the constructor's brokers and group unless a `.property()` overrides them,
// and the two auto-commit switches forced off (KAF-1).
//
// `canonical_bootstrap()` and `subscription_identity()` implement CON-4's
// "same physical subscription" test: a seed list is a set of addresses, so
// order, case, whitespace, duplicates and the default port do not matter.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace harvest::kafka {

/// Where a partition without a committed offset starts, from the effective
/// `auto.offset.reset`: harvest defaults it to earliest (librdkafka's own
/// default is latest); the caller's `.property("auto.offset.reset", …)` wins.
enum class OffsetReset { kEarliest, kLatest, kError };

/// The settings of one KafkaSource: brokers, group, topic, librdkafka
/// properties and harvest's read-ahead and timeout knobs. A plain value with
/// no locking: builders return the config (an lvalue reference, or an rvalue
/// on a temporary, so it can be built inline in a connect() call); nothing is
/// validated until KafkaSource::connect, which copies it.
class KafkaSourceConfig {
 public:
  /// `brokers`: bootstrap.servers seed list; `group`: group.id; `topic`: the
  /// one topic this source subscribes to (also its stream name).
  KafkaSourceConfig(std::string brokers, std::string group, std::string topic);

  /// Any librdkafka property, applied in call order (a later call for the
  /// same key wins). `metadata.broker.list` is treated as its alias
  /// `bootstrap.servers`. `enable.auto.commit` and `enable.auto.offset.store`
  /// are accepted but overridden to false at connect, with a warning.
  KafkaSourceConfig& property(std::string key, std::string value) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& property(std::string key, std::string value) &&;

  /// The read-ahead of `receive`: at most this many messages, and at most
  /// `max_buffered_bytes` of payload, key and headers (defaults 100,000 and
  /// 32 MiB; 0 is floored to 1). When it is full the poller first stops
  /// consuming — librdkafka keeps what it prefetched, itself bounded by
  /// `queued.max.messages.kbytes` (harvest's default 16 MiB, with
  /// `queued.min.messages` 10,000) — and only if it stays full for a second
  /// pauses the partitions (which keeps the member in the group however long
  /// dispatch takes, but makes librdkafka drop its prefetch and refetch on
  /// resume). Fetching resumes when both bounds are at half. Read-ahead
  /// messages are not committed, so a crash costs only redelivery.
  KafkaSourceConfig& max_buffered(size_t n) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& max_buffered(size_t n) &&;
  /// The read-ahead's byte bound (payload, key and headers): see
  /// max_buffered(). Default 32 MiB; 0 is floored to 1.
  KafkaSourceConfig& max_buffered_bytes(size_t n) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& max_buffered_bytes(size_t n) &&;

  /// Bound on each synchronous broker round trip the source makes on its own
  /// behalf: the anchor commits of recover() and of the eager `latest` floor,
  /// the final commit on revocation, and the committed-offset query that
  /// precedes them. Default 10 s. A commit that misses it is reported as a
  /// transient failure (it may still land later; it only ever commits work
  /// that is already durable).
  KafkaSourceConfig& sync_timeout(std::chrono::milliseconds t) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& sync_timeout(std::chrono::milliseconds t) &&;

  /// Bound on closing a consumer (recover(), destruction): handing the
  /// assignment back and leaving the group. A broker that does not answer
  /// costs at most this (plus a 500 ms slice to leave the group); the member
  /// is then released and the group drops it at its session timeout.
  /// Default 10 s.
  KafkaSourceConfig& close_timeout(std::chrono::milliseconds t) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& close_timeout(std::chrono::milliseconds t) &&;

  /// A stable name for this process, unique among the live ones (a pod or
  /// host name; Kafka allows letters, digits, '.', '_' and '-'), the same one
  /// EngineConfig::instance_id carries. With one the consumer joins with
  /// static membership (`group.instance.id` = `<id>.<topic>`): a process
  /// restarted within `session.timeout.ms` gets its partitions back at once,
  /// with no rebalance of the rest of the group; a process that stops for good
  /// keeps its partitions unserved until the session times out. Two sources
  /// of one process on one topic and group need distinct ids. Default:
  /// $HARVEST_INSTANCE_ID; empty: dynamic membership. An explicit
  /// `.property("group.instance.id", …)` wins.
  KafkaSourceConfig& instance_id(std::string id) &;
  /// As above, on a temporary config.
  KafkaSourceConfig&& instance_id(std::string id) &&;

  /// The one topic consumed; also the source's stream name.
  [[nodiscard]] const std::string& topic() const { return topic_; }
  /// The read-ahead's message bound (at least 1).
  [[nodiscard]] size_t max_buffered() const { return max_buffered_; }
  /// The read-ahead's byte bound (at least 1).
  [[nodiscard]] size_t max_buffered_bytes() const { return max_buffered_bytes_; }
  /// The bound on each synchronous commit round trip.
  [[nodiscard]] std::chrono::milliseconds sync_timeout() const { return sync_timeout_; }
  /// The bound on closing a consumer.
  [[nodiscard]] std::chrono::milliseconds close_timeout() const { return close_timeout_; }
  /// The instance id in effect (the explicit one, else $HARVEST_INSTANCE_ID).
  [[nodiscard]] std::string effective_instance_id() const;
  /// Properties as given, in call order, after alias normalisation.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& properties() const {
    return properties_;
  }

  /// The properties the consumer is created with (see the file comment).
  [[nodiscard]] std::map<std::string, std::string> effective_properties() const;
  /// bootstrap.servers as the consumer will see it: the constructor's brokers
  /// unless a `.property()` overrides them.
  [[nodiscard]] std::string effective_brokers() const;
  /// group.id as the consumer will see it: the constructor's group unless a
  /// `.property()` overrides it.
  [[nodiscard]] std::string effective_group() const;
  /// The effective `auto.offset.reset`, parsed without regard to case:
  /// smallest/earliest/beginning give kEarliest, error gives kError, anything
  /// else kLatest; unset (never, given harvest's default) would be kEarliest.
  [[nodiscard]] OffsetReset offset_reset() const;

 private:
  std::string brokers_;
  std::string group_;
  std::string topic_;
  std::vector<std::pair<std::string, std::string>> properties_;
  size_t max_buffered_ = 100'000;
  size_t max_buffered_bytes_ = size_t{32} << 20;
  std::chrono::milliseconds sync_timeout_{10'000};
  std::chrono::milliseconds close_timeout_{10'000};
  std::optional<std::string> instance_id_;
};

/// The seed list in canonical form: split on commas, whitespace trimmed, empty
/// entries dropped, host lower-cased, port 9092 added where absent (IPv6
/// literals in brackets are understood), duplicates removed, sorted, joined
/// with ','. `B:9092,a` and `a:9092, b` both give `a:9092,b:9092`.
[[nodiscard]] std::string canonical_bootstrap(const std::string& brokers);

/// CON-4's identity: canonical bootstrap + effective group.id + topic, encoded
/// injectively (a JSON array) behind a `kafka:` tag.
[[nodiscard]] std::string subscription_identity(const KafkaSourceConfig& config);

}  // namespace harvest::kafka
