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
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>
#include <harvest/store/migrations.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::connector {

// The connector's migration set ("connector"): harvest_connector_dead_letters.
[[nodiscard]] store::MigrationSet connector_migrations();

struct DeadLetter {
  std::string binding;
  std::string stream;
  std::string coordinates;      // rendered
  std::string idempotency_key;  // the message's dedupe key
  std::string reason;           // undecodable | start_rejected | mapping_rejected
  std::string detail;
  int attempts = 1;
  std::string payload;  // raw bytes
  // The coordinates structured (coordinates_json), stored for replay; null
  // stores none.
  Json coordinates_structured = nullptr;
};

// Thread-safe: called from dispatch threads.
class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  // Durably records `letter` (a repeat of the same key is a success).
  [[nodiscard]] virtual Status write(const DeadLetter& letter) = 0;
};

class PostgresDeadLetterSink final : public DeadLetterSink {
 public:
  // Keeps a reference to `pool`, which must outlive the sink.
  explicit PostgresDeadLetterSink(store::Pool& pool) : pool_(pool) {}
  [[nodiscard]] Status write(const DeadLetter& letter) override;

 private:
  store::Pool& pool_;
};

// Keeps dead letters in memory (deduplicated by key), for tests.
// `fail_writes(true)` makes every write fail, to exercise the downgrade to a retry.
class RecordingDeadLetterSink final : public DeadLetterSink {
 public:
  [[nodiscard]] Status write(const DeadLetter& letter) override;
  [[nodiscard]] std::vector<DeadLetter> letters() const;
  void fail_writes(bool fail);

 private:
  mutable std::mutex mu_;
  std::vector<DeadLetter> letters_;
  bool fail_ = false;
};

// The default of a directly constructed runtime: every write fails with a
// config error naming both remedies (and is logged as an error).
class UnconfiguredDeadLetterSink final : public DeadLetterSink {
 public:
  explicit UnconfiguredDeadLetterSink(std::string binding) : binding_(std::move(binding)) {}
  [[nodiscard]] Status write(const DeadLetter& letter) override;

 private:
  std::string binding_;
};

}  // namespace harvest::connector
