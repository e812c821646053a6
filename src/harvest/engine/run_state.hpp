// One run of one execution on one worker: the replay cursor over its
// recorded history and the lease-fenced writes of new history. Internal to
// the engine (used by WorkflowContext and Worker).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/history_writer.hpp>

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

class RunState {
 public:
  // Keeps references to `engine` and `writer` (the shard's group commit of
  // history); `run` is the claim (history included).
  // `cancel` is raised (by the claim or a lease renewal) when an operator
  // asked the run to cancel.
  RunState(Engine& engine, size_t shard, HistoryWriter& writer, ClaimedRun run,
           std::shared_ptr<const std::atomic<bool>> cancel)
      : engine_(engine),
        shard_(shard),
        writer_(writer),
        run_(std::move(run)),
        cancel_(std::move(cancel)) {}

  Engine& engine() { return engine_; }
  [[nodiscard]] const ClaimedRun& run() const { return run_; }
  [[nodiscard]] Fence fence() const { return Fence{run_.id, run_.lease}; }
  [[nodiscard]] long long signal_seq_seen() const { return run_.signal_seq; }
  // Now on the database's clock (ENG-21): this host's clock corrected by the
  // offset the claim measured. Every deadline a run writes (timers, signal
  // timeouts) and compares comes from it, so hosts whose clocks disagree
  // agree with the claims, which compare run_after with the database's now().
  // Never earlier than the database's now() at the claim, so a deadline the
  // claim found due is due here too, whatever the measurement's error.
  [[nodiscard]] std::chrono::system_clock::time_point now() const {
    return std::max(std::chrono::system_clock::now() + run_.clock_offset, run_.claimed_at);
  }

  // The recorded result at the next op position, checked to match `kind` and
  // `name` (a mismatch means the workflow code is not deterministic). Throws
  // `Cancelled` where the run's cancellation was delivered (recorded), or
  // delivers a pending one here when nothing is recorded at this position.
  // Locks handed back by a guard since the last durable operation (ENG-20)
  // are released first, each at its own position.
  const RecordedOp* next_recorded(const std::string& kind, const std::string& name);
  // Whether the run has been handed its Cancelled (live or in replay).
  [[nodiscard]] bool cancel_delivered() const { return cancel_delivered_; }
  int current_seq() const { return cursor_; }
  // Records a result at the current position (after next_recorded returned
  // nothing) and advances. Fenced on the lease.
  void record(const std::string& kind, const std::string& name, const Json& payload);
  // The next staged signal named `name` after the last consumed one.
  std::optional<std::pair<long long, Json>> next_signal(const std::string& name);

  // ---- the durable mutex (ENG-20) ----
  // Queues the run for `name` (no history written).
  void enqueue_lock(const std::string& name);
  // Whether `name` is granted to the run now (no history written).
  bool try_grant_lock(const std::string& name);
  // Leaves the queue of (or hands back) `name`, fenced; no history written.
  void leave_lock(const std::string& name);
  // The durable operation that hands `name` back: replayed if recorded,
  // else released and recorded as LockReleased.
  void release_lock_op(const std::string& name);
  void mark_held(const std::string& name) {
    held_locks_.insert(name);
    used_locks_ = true;
  }
  void note_lock_used() { used_locks_ = true; }
  [[nodiscard]] bool holds_lock(const std::string& name) const {
    return held_locks_.count(name) > 0;
  }
  // A guard left scope: the lock goes back at the next durable operation.
  void defer_release(const std::string& name) noexcept;
  // Whether this attempt queued for or held any lock: when it ends, the
  // worker sweeps the locks of closed runs so the next in line is woken.
  [[nodiscard]] bool used_locks() const { return used_locks_; }

 private:
  Engine& engine_;
  size_t shard_;
  HistoryWriter& writer_;
  ClaimedRun run_;
  std::shared_ptr<const std::atomic<bool>> cancel_;
  bool cancel_delivered_ = false;
  int cursor_ = 0;
  std::map<std::string, long long> last_signal_id_;  // per signal name, consumed so far
  std::set<std::string> held_locks_;
  std::vector<std::string> releases_due_;  // handed back by guards, not yet released
  bool used_locks_ = false;

  // next_recorded without releasing due locks first; `deliver_cancel` false
  // for the release of a lock, which never delivers a cancellation.
  const RecordedOp* lookup(const std::string& kind, const std::string& name, bool deliver_cancel);
};

}  // namespace harvest::engine
