// Dead-letter destinations for poison messages (CON-10).
//
// Default: a row in `harvest_connector_dead_letters` (the connector's own
// migration set), unique on the message's dedupe key so dead-lettering is
// idempotent; the message is acked only after the row commits. A runtime
// built directly (not by the plugin) starts with `UnconfiguredDeadLetterSink`,
// which refuses every write: a poison message then stays on the broker and an
// error names both remedies, instead of being acked with no record anywhere.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>
#include <harvest/store/migrations.hpp>

namespace harvest::store {
class Pool;  // <harvest/store/pool.hpp>, internal
}  // namespace harvest::store

namespace harvest::connector {

/// The connector's migration set ("connector"): harvest_connector_dead_letters.
[[nodiscard]] store::MigrationSet connector_migrations();

/// Bounds on the headers a dead letter stores (the payload is stored whole):
/// at most this many headers...
inline constexpr size_t kMaxStoredHeaders = 100;
/// ...while their names and values together fit in this many bytes.
inline constexpr size_t kMaxStoredHeaderBytes = 64 * 1024;

/// One poison message as a DeadLetterSink records it. A plain value, built by
/// the connector runtime.
struct DeadLetter {
  std::string binding;          ///< name of the binding that gave up on the message
  std::string stream;           ///< the binding's stream
  std::string coordinates;      ///< rendered
  std::string idempotency_key;  ///< the message's dedupe key
  /// undecodable | mapping_rejected | start_rejected | coordinate_collision
  /// (connector_dlq::kReasons), as stored and shown.
  std::string reason;
  std::string detail;  ///< what was wrong with it, for operators
  /// Deliveries that failed before the message was dead-lettered: the strikes
  /// of a mapping_rejected message, 1 otherwise. Default 1.
  int attempts = 1;
  std::string payload;  ///< raw bytes
  /// The record key (Kafka), raw bytes; unset when the message has none.
  std::optional<std::string> key;
  /// The headers (Kafka headers, SQS string attributes) in broker order:
  /// the first kMaxStoredHeaders of them, while their values fit in
  /// kMaxStoredHeaderBytes.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The coordinates structured (coordinates_json), stored for replay; null
  /// stores none.
  Json coordinates_structured = nullptr;
  /// The record's fingerprint (fingerprint.hpp); unset for SQS messages.
  std::optional<int64_t> fingerprint = std::nullopt;
};

/// Where a connector runtime records poison messages before it acks them.
/// The runtime holds its sink by `shared_ptr` (with_dead_letter_sink), shared
/// with whoever else holds it, and uses it for as long as it runs; a sink
/// keeps no reference to the letters it is given.
/// Thread-safe: called from dispatch threads.
class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  /// Durably records `letter` (a repeat of the same key is a success).
  [[nodiscard]] virtual Status write(const DeadLetter& letter) = 0;
};

/// The dead-letter reason of a coordinate collision
/// (CollisionPolicy::kDeadLetter); its replay starts the record under the
/// binding's current key incarnation.
inline constexpr std::string_view kCollisionReason = "coordinate_collision";

/// The default sink: one row per letter in `harvest_connector_dead_letters`
/// (created by connector_migrations()). Usable as soon as it is constructed;
/// holds nothing but a reference to its pool. Thread-safe: each write takes
/// its own pooled connection.
class PostgresDeadLetterSink final : public DeadLetterSink {
 public:
  /// Keeps a reference to `pool`, which must outlive the sink.
  explicit PostgresDeadLetterSink(store::Pool& pool) : pool_(pool) {}
  /// Inserts `letter` in one statement; a row with the same dedupe key
  /// already there makes it a no-op success — unless that row came from
  /// another record (both have fingerprints and they differ: a position
  /// reused by a recreated topic), when `letter` gets a row of its own under
  /// the key with its fingerprint appended, so its payload is never dropped. Text columns are
  /// stored as valid UTF-8 (ill-formed bytes replaced); the payload is kept byte for byte. Errors:
  /// those of acquiring a connection or of the insert.
  [[nodiscard]] Status write(const DeadLetter& letter) override;

 private:
  store::Pool& pool_;
};

/// Keeps dead letters in memory (deduplicated by key), for tests.
/// `fail_writes(true)` makes every write fail, to exercise the downgrade to a retry.
/// Owns copies of the letters it keeps, until it is destroyed. Thread-safe
/// (one mutex): every method may be called from any thread.
class RecordingDeadLetterSink final : public DeadLetterSink {
 public:
  /// Keeps a copy of `letter` unless one with its dedupe key is kept already
  /// (a letter from another record — another fingerprint — is kept under
  /// the key with its fingerprint appended, as PostgresDeadLetterSink does).
  /// Errors: kTransient while `fail_writes(true)` is in effect.
  [[nodiscard]] Status write(const DeadLetter& letter) override;
  /// A copy of every letter kept, in the order first written.
  [[nodiscard]] std::vector<DeadLetter> letters() const;
  /// true: every later write fails (and keeps nothing); false: writes succeed
  /// again. Initially false.
  void fail_writes(bool fail);

 private:
  mutable std::mutex mu_;
  std::vector<DeadLetter> letters_;
  bool fail_ = false;
};

/// The default of a directly constructed runtime: every write fails with a
/// config error naming both remedies (and is logged as an error).
/// Holds only the binding's name. Thread-safe: it has no mutable state.
class UnconfiguredDeadLetterSink final : public DeadLetterSink {
 public:
  /// `binding`: the name of the binding, used in the error message.
  explicit UnconfiguredDeadLetterSink(std::string binding) : binding_(std::move(binding)) {}
  /// Records nothing: logs and returns a kConfig error naming the binding,
  /// the message and both remedies (with_dead_letter_sink, or
  /// broker_native_dead_letter).
  [[nodiscard]] Status write(const DeadLetter& letter) override;

 private:
  std::string binding_;
};

}  // namespace harvest::connector
