// ExecutionStore: the one place that writes SQL for executions, their
// history (events), start-idempotency claims, staged signals and the engine's
// dead letters. The start path, the signal path, the worker and the workflow
// context call it; nothing else in harvest names these tables.
//
// A store is a thin view over one borrowed connection (kept by reference for
// the store's lifetime, which must not outlive it); it holds no other state.
// Not thread-safe, like the connection. Every call is one round trip unless
// it says otherwise. Errors are the connection's: transient when the
// database is unreachable, permanent (kBadRequest/kConflict/kInternal) when it
// refuses the data, never a SQLSTATE.
//
// Fencing. A worker owns a running execution through its claim's lease token
// (`Fence`): the run's row in harvest_run_leases (the narrow run queue,
// migration engine_0016) names the token. Every write of a run's history or outcome
// carries the fence and takes effect only while that row names the token, so
// a worker whose lease lapsed and was taken over can never write again. A
// held run keeps the status it was claimed in (pending or waiting) on its
// execution row; readers show it as running
// (sql/fragments/shown_status.sql).
//
// The statements themselves are files under sql/ (see sql/README.md).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/engine/types.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::engine {

// One execution to create: the row (which is its WorkflowStarted event too)
// and, when `idempotency_key` is set, its start-idempotency claim.
struct NewExecution {
  std::string id;  // a fresh uuid (becomes the execution id if this start creates it)
  std::string workflow;
  std::optional<std::string> workflow_id;
  Json input;
  std::optional<std::string> idempotency_key;
  std::string source;
  std::optional<std::string> source_ref;
  std::optional<TraceContext> trace;
  int max_attempts = 3;
  std::optional<std::string> concurrency_key;  // ENG-19, for a keyed workflow
  // The fingerprint of the broker record a coordinate key was derived from
  // (connector/fingerprint.hpp): stored with the key, compared on a key hit.
  std::optional<int64_t> fingerprint;
};

// What became of one start of a batch.
struct StoredStart {
  bool started = false;      // this start created `execution_id`
  std::string execution_id;  // the created one, or the one it resolved to (replay)
  // The key resolved to a run recorded from a record with another
  // fingerprint: a coordinate collision, not a redelivery.
  bool collision = false;
  // Not committed: the batch was refused because another item collided
  // (refuse_collisions); commit it again without the collisions.
  bool withheld = false;
};

// One signal-with-start of a batch (the entity pattern).
struct NewEntitySignal {
  NewExecution start;     // the run to create if the entity has none (workflow_id set)
  bool startable = true;  // false: the start input is invalid, attach only
  std::string signal;
  Json payload;
  std::optional<std::string> signal_key;
  bool reuse_after_close = true;              // a closed current run is followed by a new run
  std::optional<int64_t> signal_fingerprint;  // of the broker record, beside signal_key
};

struct StoredEntitySignal {
  std::string execution_id;
  bool started = false;           // this call created the run
  bool duplicate_signal = false;  // the signal's key was already staged, on any run
  int run_no = 1;
  // The run is completed or failed and the signal is new: nothing was
  // staged. (The caller decides: refuse, or start a new run.)
  std::optional<std::string> closed_status;
  bool missing = false;  // no run exists and none could be started (invalid input)
  // duplicate_signal, but the key was staged from a record with another
  // fingerprint: a coordinate collision, not a redelivery.
  bool collision = false;
  bool withheld = false;  // as StoredStart::withheld
};

// A lease: the execution and this claim's token.
struct Fence {
  std::string execution_id;
  std::string lease;
};

// A recorded durable operation of a run's history.
struct RecordedOp {
  std::string kind;
  std::string name;
  Json payload;
};

// A runnable execution claimed under a lease, with the history a run needs.
struct ClaimedRun {
  std::string id;
  std::string lease;
  std::string workflow_name;
  std::optional<std::string> workflow_id;
  Json input;
  int attempt = 1;
  int max_attempts = 3;
  long long signal_seq = 0;
  bool entity_reuse = false;          // created by signal-with-start under allow_after_close
  std::optional<TraceContext> trace;  // the start's trace context
  bool cancel_requested = false;      // an operator asked the run to cancel (ENG-17)
  // Takeovers since the run last recorded a durable operation, this claim
  // included when it was one (ENG-18).
  int crash_count = 0;
  // The database's clock minus this host's, measured by the claim (ENG-21):
  // the run computes its deadlines on the database's clock, the one leases
  // and wake-ups are compared with.
  std::chrono::milliseconds clock_offset{0};
  // The database's now() when the run was claimed (it was due then).
  std::chrono::system_clock::time_point claimed_at{};
  std::map<int, RecordedOp> ops;  // op_seq -> recorded result
};

// Rows of a listing page, before the engine merges shards.
struct ListedExecution {
  long long created_us = 0;
  ExecutionSummary summary;
};

// One write of a run's history in a group commit (ExecutionStore::write_batch):
// the result of operation `op_seq` (`op`), or a plain completion (`output`).
struct RunWrite {
  Fence fence;
  int op_seq = 0;
  std::optional<RecordedOp> op;  // set: a record; unset: a completion
  Json output;
};

struct CompletedRun {
  bool completed = false;  // false: the fence no longer held
  // The next run of an entity that completed with unread signals, and how
  // many signals it took over.
  std::optional<std::string> next_run;
  int carried_signals = 0;
};

class ExecutionStore {
 public:
  explicit ExecutionStore(store::Connection& conn) : conn_(conn) {}

  // ---- starts (execution_store_starts.cpp) ---------------------------------

  // Group commit of immediate starts: all of `items` in one implicit transaction of one round
  // trip. Per item, in order: a key already claimed (and not expired) resolves to the run holding
  // it; else a workflow_id that names a run resolves to it (the key is not recorded there: a run
  // holds the key of the start that created it); else the execution is created, holding the key
  // until `window` has passed (a key whose window lapsed is released from its old run first, in a
  // second round trip). Duplicated keys within the batch resolve to the first item's outcome. The
  // outer error is the batch's (nothing was written); an inner error belongs to its item alone.
  // `window`: how long a key's claim lasts. `notify`: also NOTIFY harvest_work
  // (sql/work/notify.sql) in the same transaction, so other processes' workers wake as it
  // commits. `refuse_collisions`: a batch in which any item meets a coordinate collision (its key
  // held by a run recorded from another record) commits nothing; a second, rolled-back round trip
  // then finds which items collided (`collision`, with the run holding the key) and marks every
  // other item `withheld`. Costs nothing while no item collides.
  [[nodiscard]] Result<std::vector<Result<StoredStart>>> start_batch(
      std::span<const NewExecution> items, std::chrono::seconds window, bool notify,
      bool refuse_collisions = false);
  // Inserts one execution row (no claim, no event), inside
  // whatever transaction the connection is in. std::nullopt: its workflow_id
  // already names a run.
  [[nodiscard]] Result<std::optional<std::string>> insert(const NewExecution& e);
  [[nodiscard]] Result<std::optional<std::string>> find(const std::string& workflow,
                                                        const std::string& workflow_id);
  // Group commit of signal-with-starts, in one implicit transaction: starts
  // the runs that do not exist, locks every target run, stages the signals in
  // batch order (so `harvest_signals.id` order is batch order per run) and
  // wakes runs that wait. Targets that are closed get nothing staged.
  // `notify` and `refuse_collisions` as for start_batch.
  [[nodiscard]] Result<std::vector<StoredEntitySignal>> signal_with_start_batch(
      std::span<const NewEntitySignal> items, bool notify, bool refuse_collisions = false);

  // ---- signals to existing runs (execution_store_starts.cpp) ---------------

  struct LockedTarget {
    std::string id;
    std::string status;
  };
  // Locks the target run for the rest of the caller's transaction (signal
  // writers serialise on it). std::nullopt when there is none.
  [[nodiscard]] Result<std::optional<LockedTarget>> lock_target(const SignalTarget& target);
  // Stages a signal for a locked run; false when its key was already staged.
  // Wakes the run if it waits.
  [[nodiscard]] Result<bool> stage_signal(const std::string& execution_id, const std::string& name,
                                          const Json& payload,
                                          const std::optional<std::string>& key);

  // A table PostgreSQL has never analyzed is planned from guesses: the claim
  // then reads every pending run each time (quadratic on a fresh
  // deployment's first backlog, until autovacuum's first pass). Analyzes the
  // run tables once they hold `min_rows` runs and were never analyzed;
  // returns whether they are analyzed now (false: not yet worth it).
  [[nodiscard]] Result<bool> analyze_if_never_analyzed(long long min_rows);

  // ---- runs: claims, history, outcomes (execution_store_runs.cpp) ----------

  // Claims up to `limit` runnable executions of `workflows` (pending/waiting,
  // due and held by nobody; then held ones whose lease lapsed; then ones
  // leased by a previous incarnation of this instance: lease owners starting
  // with `own_prefix` that are not `owner`), with their recorded history.
  // Each claim gets its own lease token, starting with `owner` + "/", in a
  // row of harvest_run_leases; the execution row is locked, not written.
  //
  // `cursor` (in/out) skips the head of the runnable index: held runs stay
  // there until their outcome and finished ones leave dead entries until
  // VACUUM, and walking them on every claim makes a large backlog
  // quadratic. With a cursor the runnable scan
  // starts at it (run_after >= cursor); a scan that finds fewer than `limit`
  // runs is followed by one from the start, so a run committed late with an
  // early run_after waits at most until the backlog thins. On return the
  // cursor is the latest run_after claimed (epoch microseconds).
  //
  // `keyed` (ENG-19): workflows with per-key concurrency and their
  // max_per_key. Their runnable runs are claimed by a claim of their own that
  // leaves a run waiting while its key has that many leases.
  [[nodiscard]] Result<std::vector<ClaimedRun>> claim(const std::vector<std::string>& workflows,
                                                      const std::string& owner,
                                                      std::chrono::milliseconds lease, size_t limit,
                                                      const std::optional<std::string>& own_prefix,
                                                      std::optional<long long>* cursor = nullptr,
                                                      const std::map<std::string, int>& keyed = {});
  // Records the result of operation `op_seq`. kConflict: the lease is lost
  // (taken over, or another holder wrote that position first).
  [[nodiscard]] Status record_op(const Fence& fence, int op_seq, const RecordedOp& op);
  // The next staged signal `name` after signal id `after`.
  [[nodiscard]] Result<std::optional<std::pair<long long, Json>>> next_signal(
      const std::string& execution_id, const std::string& name, long long after);
  // Outcomes, each fenced; false when the fence no longer holds. Completing
  // an entity run (created under allow_after_close) that left signals unread
  // starts its next run with those signals (`next_run`).
  [[nodiscard]] Result<CompletedRun> complete(const Fence& fence, const Json& output,
                                              bool entity_reuse);
  // Group commit of run writes, at most one per run: records and plain
  // (non-entity) completions of many runs in one implicit transaction of one
  // round trip. The execution rows are locked first, in id order, so
  // concurrent batches never deadlock (and renewals never wait). Per write: true when it took
  // effect; false when its fence no longer held (a record: or another holder
  // wrote its position) — the lease is lost. The outer error is the batch's:
  // nothing was written.
  [[nodiscard]] Result<std::vector<bool>> write_batch(std::span<const RunWrite> writes);
  [[nodiscard]] Result<bool> retry_later(const Fence& fence, const std::string& error,
                                         std::chrono::milliseconds backoff, int attempt);
  // Records the failure and puts the run in the engine's dead letters.
  [[nodiscard]] Result<bool> fail_run(const Fence& fence, const std::string& error);
  // Parks the run until `until_ms` (epoch ms), or at once if a signal was
  // staged since `signal_seq_seen`.
  [[nodiscard]] Result<bool> suspend(const Fence& fence, long long signal_seq_seen,
                                     long long until_ms);
  // Hands the run back to be retried after `delay` without spending an attempt.
  [[nodiscard]] Result<bool> release(const Fence& fence, std::chrono::milliseconds delay);
  // Extends the leases named by `tokens` (their lease rows only); returns
  // the tokens among them whose run has a cancel request, so the worker
  // executing it delivers the cancellation at its next durable operation.
  [[nodiscard]] Result<std::vector<std::string>> renew_leases(
      const std::vector<std::string>& tokens, std::chrono::milliseconds lease);
  // Fails a run whose takeovers reached its poison-pill threshold into the
  // engine's dead letters with reason `crashed_worker` (fenced).
  [[nodiscard]] Result<bool> fail_crashed(const Fence& fence, const std::string& error);

  // ---- operators: cancel and terminate (execution_store_cancel_terminate.cpp)

  // What a cancel or terminate found. std::nullopt from the calls below:
  // no such execution.
  struct StopResult {
    std::string workflow;           // the run's workflow name
    std::string status;             // the status before the call
    bool cancel_requested = false;  // a cancel request was recorded before the call
    bool changed = false;           // this call recorded the request / terminated the run
  };
  // Records a cancel request on an open run with its CancelRequested event
  // ({reason, requested_by}) and makes a pending or waiting run runnable now
  // (it sees the request when it replays to its next durable operation);
  // NOTIFYs workers. Nothing changes on a closed run or a repeated request.
  [[nodiscard]] Result<std::optional<StopResult>> request_cancel(const std::string& execution_id,
                                                                 const std::string& reason,
                                                                 const std::string& by);
  // Ends an open run as `terminated` now, with its WorkflowTerminated event.
  // Its lease is cleared, so the worker executing it fails its next fenced
  // write and stops.
  [[nodiscard]] Result<std::optional<StopResult>> terminate(const std::string& execution_id,
                                                            const std::string& reason,
                                                            const std::string& by);
  // Open runs matching `filter`.
  [[nodiscard]] Result<long long> count_open(const StopFilter& filter);
  // The bulk forms: every open run matching `filter`, in transactions of at
  // most 1,000 runs; returns how many changed, per workflow name.
  [[nodiscard]] Result<std::map<std::string, long long>> request_cancel_where(
      const StopFilter& filter, const std::string& reason, const std::string& by);
  [[nodiscard]] Result<std::map<std::string, long long>> terminate_where(const StopFilter& filter,
                                                                         const std::string& reason,
                                                                         const std::string& by);
  // The reason of the run's pending cancel request ("" when none).
  [[nodiscard]] Result<std::string> cancel_reason(const std::string& execution_id);
  // Ends a run that saw its cancellation as `cancelled` (fenced), with the
  // workflow's output (null when it did not return) and the error it ended
  // with, if any.
  [[nodiscard]] Result<bool> finish_cancelled(const Fence& fence, const Json& output,
                                              const std::optional<std::string>& error);

  // ---- the durable mutex, ENG-20 (execution_store_mutex.cpp) ---------------
  //
  // A named lock is a FIFO queue of runs; its holder is the first queued run
  // that is still open. Every call on a name serialises on a
  // transaction-scoped advisory lock of that name, so a release and a
  // waiter's check never miss each other. Names are shard-local, like every
  // other coordination primitive.

  // Queues the run (fenced) for `name`; idempotent, the run keeps its place.
  // false when the fence no longer holds.
  [[nodiscard]] Result<bool> enqueue_lock(const Fence& fence, const std::string& name);
  // Grants `name` to the run when it is first in line; true when it holds it
  // (idempotent for the holder).
  [[nodiscard]] Result<bool> try_grant_lock(const std::string& execution_id,
                                            const std::string& name);
  // Leaves the queue of `name` (fenced: a worker whose lease was taken over
  // cannot release the run's lock) and wakes the next run in line. false
  // when the fence no longer holds.
  [[nodiscard]] Result<bool> release_lock(const Fence& fence, const std::string& name);
  // Drops the queue places of closed (or purged) runs and wakes the next in
  // line of each name they held or waited for; the number of names touched.
  [[nodiscard]] Result<int> sweep_locks();

  // ---- reads, dead letters, retention (execution_store_reads.cpp) ---------

  [[nodiscard]] Result<bool> exists(const std::string& execution_id);
  [[nodiscard]] Result<std::optional<ExecutionView>> get(const std::string& execution_id);
  // Newest first, at most `limit` (+1 to tell whether more follow).
  [[nodiscard]] Result<std::vector<ListedExecution>> list(
      const ExecutionFilter& filter, const std::optional<std::string>& cursor_us,
      const std::optional<std::string>& cursor_id, size_t limit);
  [[nodiscard]] Result<long long> runnable_count();
  // Adds this shard's counts into `into` (runs by workflow and status, and
  // the runs started and closed within `into.window`).
  [[nodiscard]] Status overview(RunOverview& into);
  // Per-minute starts, completions and failures from the minute holding
  // `since` (seconds since the epoch) to now, oldest first.
  [[nodiscard]] Result<std::vector<MinuteActivity>> activity(long long since);
  // Newest failure first, after the cursor (failed_at in epoch
  // microseconds and execution id) when given; each with its failed_at in
  // microseconds.
  [[nodiscard]] Result<std::vector<std::pair<long long, EngineDeadLetter>>> dead_letters(
      size_t limit, const std::optional<std::string>& cursor_us = std::nullopt,
      const std::optional<std::string>& cursor_id = std::nullopt);
  // Marks the dead letter replayed and makes the run pending again (in the
  // caller's transaction). kNotFound / kConflict name what was wrong.
  [[nodiscard]] Status replay_dead_letter(const std::string& execution_id);
  // Deletes terminal runs (with events, signals and dead letters) completed
  // more than `age` ago: of `workflow`, or of every workflow not in `except`.
  // A run still holding its start's idempotency key is kept until the key's
  // window lapses, so a redelivery inside the window still finds it.
  [[nodiscard]] Result<long long> purge_terminal(const std::optional<std::string>& workflow,
                                                 const std::vector<std::string>& except,
                                                 std::chrono::seconds age);
  // Deletes expired v1 claim rows (harvest_start_claims); claims held on
  // execution rows need no purge.
  [[nodiscard]] Result<long long> purge_expired_claims();

 private:
  // One attempt of start_batch / signal_with_start_batch: `refuse` makes a
  // colliding item fail the whole pipeline (kCollisionRefused in its
  // detail); `dry_run` runs it in a transaction that is rolled back.
  Result<std::vector<Result<StoredStart>>> start_batch_round(std::span<const NewExecution> items,
                                                             std::chrono::seconds window,
                                                             bool notify, bool refuse,
                                                             bool dry_run);
  Result<std::vector<StoredEntitySignal>> signal_batch_round(std::span<const NewEntitySignal> items,
                                                             bool notify, bool refuse,
                                                             bool dry_run);
  // `{...}` SQL array literal of text values (quoted and escaped).
  static std::string text_array(const std::vector<std::string>& values);

  store::Connection& conn_;
};

}  // namespace harvest::engine
