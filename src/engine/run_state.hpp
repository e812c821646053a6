// One run of one execution on one worker: the replay cursor over its
// recorded history and the lease-fenced writes of new history. Internal to
// the engine (used by WorkflowContext and Worker).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "engine/engine.hpp"

namespace harvest::engine {

// Thrown by a durable operation to park the run until `until` (or a signal).
// Deliberately not a std::exception: workflow code catching std::exception
// must not swallow it.
struct Suspension {
  std::chrono::system_clock::time_point until;
};

// Thrown when this worker no longer holds the execution's lease (another
// worker took it over): the run stops without writing anything.
struct LeaseLost {};

// Thrown when a history write or read fails transiently; the attempt is
// abandoned (not failed) and the run retried soon.
struct HistoryUnavailable {
  Error error;
};

struct RecordedOp {
  std::string kind;
  std::string name;
  Json payload;
};

class RunState {
 public:
  RunState(Engine& engine, std::string owner, std::chrono::milliseconds lease)
      : engine_(engine), owner_(std::move(owner)), lease_(lease) {}

  Engine& engine() { return engine_; }
  store::Pool& pool() { return engine_.pool(shard); }
  size_t shard = 0;
  std::string execution_id;
  std::optional<std::string> workflow_id;
  std::string workflow_name;
  int attempt = 1;
  Json input;
  long long signal_seq_seen = 0;
  std::map<int, RecordedOp> ops;                    // op_seq -> recorded result
  std::map<std::string, long long> last_signal_id;  // per signal name, consumed so far

  // Loads recorded ops and the signal sequence for `execution_id`.
  void load();
  // The recorded result at the next op position, checked to match `kind` and
  // `name` (a mismatch means the workflow code is not deterministic).
  const RecordedOp* next_recorded(const std::string& kind, const std::string& name);
  int current_seq() const { return cursor_; }
  // Records a result at the current position (after next_recorded returned
  // nothing) and advances. Fenced on the lease.
  void record(const std::string& kind, const std::string& name, const Json& payload);
  // The next staged signal named `name` after the last consumed one.
  std::optional<std::pair<long long, Json>> next_signal(const std::string& name);

  const std::string& owner() const { return owner_; }
  std::chrono::milliseconds lease() const { return lease_; }

 private:
  Engine& engine_;
  std::string owner_;
  std::chrono::milliseconds lease_;
  int cursor_ = 0;
};

}  // namespace harvest::engine
