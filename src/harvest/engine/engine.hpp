// The workflow engine's service: open the harvest database, start workflows,
// stage signals, read executions, fire deferred starts, purge.
//
// The implementation is split by concern: engine.cpp (opening, shards,
// routing), start.cpp (starts and their idempotency), admission.cpp
// (throttle, debounce, batch), signal.cpp (signals, signal-with-start),
// reads.cpp (executions, dead letters), retention.cpp (purge). Every
// statement on executions, history, claims and signals goes through
// ExecutionStore (execution_store.hpp).
//
// Group commit: `start_batch` and `signal_with_start_batch` commit N
// requests in one transaction per shard with a constant number of round
// trips, and give each request the outcome it would have had alone; the
// single-request calls are the N = 1 case of the same code.
//
// `Engine` is thread-safe; every call borrows a pooled connection for its own
// transaction. Expected failures are `Result` values: permanent errors are
// the caller's (unknown workflow, bad input, reserved key, an identifier over
// its limit), transient errors (database down, pool exhausted) may succeed on
// retry.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/engine/types.hpp>
#include <harvest/engine/workflow.hpp>
#include <harvest/store/migrations.hpp>

// libpq's connection handle, declared exactly as <libpq-fe.h> declares it.
typedef struct pg_conn PGconn;

namespace harvest::store {
class Pool;  // <harvest/store/pool.hpp>, internal
}  // namespace harvest::store

namespace harvest::engine {
class WorkSignal;  // <harvest/engine/work_signal.hpp>, internal
}  // namespace harvest::engine

namespace harvest::engine::internal {
class ConnectorStarts;  // the connector's derived-key path (connector_starts.hpp)
struct DerivedStart;
struct DerivedSignalWithStart;
template <typename Outcome>
struct Derived;
}  // namespace harvest::engine::internal

namespace harvest::engine {

/// The engine's own migration set ("engine").
[[nodiscard]] store::MigrationSet engine_migrations();

/// Rejects an idempotency key under the reserved prefix (case-sensitive).
[[nodiscard]] Status check_caller_key(const std::optional<std::string>& key);

/// The engine's service over one or more harvest database shards: starts,
/// signals, reads, stops, deferred starts and purge (see the file comment).
///
/// Lifecycle: made only by `open()`, which returns it owned by a unique_ptr;
/// it owns one connection pool per shard and closes them when destroyed.
/// Workers, connector runtimes and the HTTP server keep references to it, so
/// it must outlive them. Thread-safe: every call borrows a pooled connection
/// for its own transaction; the accessors return references into the engine,
/// valid for its lifetime.
class Engine {
 public:
  /// Resolves the harvest database (split URL, then embedded URL, then the
  /// private dev cluster under the dev profile), connects, and applies the
  /// engine's and `plugin_migrations` (dev profile) or warns naming each
  /// pending one. Fails with a config/transient error when no database can be
  /// reached.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> open(
      EngineConfig config, WorkflowRegistry workflows,
      std::vector<store::MigrationSet> plugin_migrations = {});
  ~Engine();

  /// ENG-4/5/6/8/9. Keys under `conn:` are rejected.
  [[nodiscard]] Result<StartOutcome> start(const StartRequest& request);
  /// ENG-16: the same start inside the caller's own open transaction on
  /// `conn`; nothing is committed or rolled back here. The caller's commit
  /// makes the start durable, and the caller's rollback undoes it with the
  /// rest of its work.
  ///
  /// The handle is libpq's own `PGconn*` on purpose: the transaction belongs
  /// to the application, which opened it with its own libpq connection (or a
  /// library over libpq that exposes it), and harvest must join that
  /// transaction rather than wrap or own the connection. A harvest type would
  /// have to be built around the caller's connection anyway and would add a
  /// lifetime to get wrong. The connection is borrowed for the call only —
  /// never kept, closed or left in another state — and must be connected to
  /// a database holding harvest's schema (the application's own database,
  /// when harvest's tables live there). Errors: kBadRequest
  /// when `conn` is null or not inside an open transaction (BEGIN first);
  /// otherwise those of start(). Not thread-safe for one `conn` (libpq's
  /// rule: one thread uses a connection at a time).
  [[nodiscard]] Result<StartOutcome> start_in_transaction(PGconn* conn,
                                                          const StartRequest& request);
  /// ENG-7: stages a signal for an existing execution.
  [[nodiscard]] Result<SignalOutcome> signal(const SignalRequest& request);
  /// ENG-7: atomic start-or-attach keyed by workflow_id.
  [[nodiscard]] Result<SignalWithStartOutcome> signal_with_start(
      const SignalWithStartRequest& request);

  /// Group commit (ENG-4..ENG-9 for N requests at once): one outcome per
  /// request, in order, each exactly what the request would get alone. The
  /// immediate starts of one shard commit in one transaction of one round
  /// trip; deferred-admission starts are admitted one by one. A request that
  /// is refused never fails the others; a transaction that fails transiently
  /// fails every request in it (nothing of it was written).
  [[nodiscard]] std::vector<Result<StartOutcome>> start_batch(
      const std::vector<StartRequest>& requests);
  /// Signals to entity runs of one or more shards, the signals of one run
  /// staged in request order.
  [[nodiscard]] std::vector<Result<SignalWithStartOutcome>> signal_with_start_batch(
      const std::vector<SignalWithStartRequest>& requests);
  /// One execution, looked up on every shard in turn. kNotFound when no shard
  /// holds it (an id that is not a UUID never matches); transient when a shard
  /// cannot be reached.
  [[nodiscard]] Result<ExecutionView> get_execution(const std::string& execution_id);
  /// Newest first; a filter value that matches nothing yields an empty page.
  [[nodiscard]] Result<ExecutionPage> list_executions(const ExecutionFilter& filter);
  /// Runs by workflow and status over every shard, and the runs started and
  /// closed within the last `window` (1 s to 1 h; others are a bad request).
  [[nodiscard]] Result<RunOverview> overview(
      std::chrono::seconds window = std::chrono::seconds(60));
  /// Runs started, completed and failed per minute over every shard, for
  /// each whole minute from `since` (seconds since the epoch, rounded down
  /// to a minute; at most 24 h back) to the current minute, oldest first.
  /// Each minute is two index range reads per shard.
  [[nodiscard]] Result<std::vector<MinuteActivity>> activity(long long since);
  /// Runs that exhausted their retries and have not been replayed (ENG-14).
  [[nodiscard]] Result<std::vector<EngineDeadLetter>> list_dead_letters(size_t limit = 100);
  /// The same, a page at a time: `limit` 1 to 1000, `cursor` the previous
  /// page's next_cursor (a malformed one is a bad request).
  [[nodiscard]] Result<EngineDeadLetterPage> dead_letter_page(
      size_t limit, const std::optional<std::string>& cursor = std::nullopt);
  /// Re-runs a dead-lettered execution from its recorded history (steps that
  /// completed are not executed again), with a fresh attempt budget.
  /// NotFound when the execution is not in the dead letters.
  [[nodiscard]] Status replay_dead_letter(const std::string& execution_id);
  /// ENG-17 (cancel_terminate.cpp). Cancel: recorded on an open run, which sees it at
  /// its next durable operation and ends `cancelled`; a repeat while it is
  /// pending, or on a run already cancelled, is kAlreadyRequested. Terminate:
  /// the run is `terminated` now; a repeat is kAlreadyTerminated. Errors:
  /// kBadRequest a reason (or requested_by) empty, over kMaxStopReason or not
  /// UTF-8; kNotFound no such execution (on any shard); kConflict the run is
  /// closed otherwise (completed, failed, or terminated/cancelled for the
  /// other call).
  [[nodiscard]] Result<StopOutcome> cancel(const StopRequest& request);
  /// See cancel: the terminate half of ENG-17, with the same errors.
  [[nodiscard]] Result<StopOutcome> terminate(const StopRequest& request);
  /// Every open run matching `filter` on every shard; with `dry_run` only
  /// counts them. kBadRequest for a status other than pending, running or
  /// waiting, or a bad reason.
  [[nodiscard]] Result<BulkStopOutcome> cancel_where(const StopFilter& filter,
                                                     const std::string& reason,
                                                     const std::string& requested_by, bool dry_run);
  /// The terminate counterpart of cancel_where, with the same filter and errors.
  [[nodiscard]] Result<BulkStopOutcome> terminate_where(const StopFilter& filter,
                                                        const std::string& reason,
                                                        const std::string& requested_by,
                                                        bool dry_run);
  /// Probes every shard.
  [[nodiscard]] std::vector<ShardStatus> shard_status();
  /// One cheap round trip on every shard: success when each answers and
  /// accepts writes, else the first shard's error (unavailable when it
  /// cannot be reached or is read-only: a standby, or a primary fenced for
  /// a failover). Callers waiting out an outage poll this instead of
  /// retrying real work.
  [[nodiscard]] Status probe_store();
  /// The id of the current (not superseded) run of `workflow_id`, read on the
  /// shard the id routes to; empty when there is none.
  [[nodiscard]] Result<std::optional<std::string>> find_execution(const std::string& workflow,
                                                                  const std::string& workflow_id);

  /// Fires deferred (throttled) starts whose tokens have freed. Returns how many
  /// executions were created.
  [[nodiscard]] Result<int> fire_deferred();
  /// Deletes terminal runs past their retention age (with events and signals)
  /// and expired start-idempotency claims. Returns runs deleted.
  [[nodiscard]] Result<int> purge();

  /// Migrations found pending on any reachable shard when `open()` checked
  /// (each once); empty under the dev profile, which applies them. Not refreshed.
  [[nodiscard]] std::vector<store::PendingMigration> pending_migrations_at_open() const;
  /// How many shards answer a round trip now. Every dedupe primitive is
  /// shard-local, so callers warn when this exceeds one.
  [[nodiscard]] int readable_shards();
  /// Configured shards, reachable or not; at least one.
  [[nodiscard]] size_t shard_count() const { return shards_.size(); }
  /// The shard a start or signal-with-start lands on (ENG-15): by workflow_id
  /// when given, else by idempotency key, else round robin. Stable: FNV-1a of
  /// the workflow name and the id/key.
  [[nodiscard]] size_t route(const std::string& workflow,
                             const std::optional<std::string>& workflow_id,
                             const std::optional<std::string>& key);
  /// Whether starts of `workflow` can be deferred by an admission policy (and so
  /// have no execution id to return for an idempotency key).
  [[nodiscard]] bool has_deferred_admission(std::string_view workflow) const;
  /// The pool of `shard` (default: the first, which also holds plugin tables).
  [[nodiscard]] store::Pool& pool(size_t shard = 0);
  /// The workflows given to `open()`.
  [[nodiscard]] const WorkflowRegistry& workflows() const { return workflows_; }
  /// The config given to `open()`, with `metrics` set (NoopMetrics if it was null).
  [[nodiscard]] const EngineConfig& config() const { return config_; }
  /// The recorder every engine metric goes to (`config().metrics`); never null.
  [[nodiscard]] metrics::MetricsRecorder& metrics() { return *config_.metrics; }
  /// The first shard's connection URL (the one holding plugin tables). It may
  /// carry a password: log store::location_of(url), not the URL.
  [[nodiscard]] const std::string& database_url() const { return shards_.front().url; }
  /// How `open()` resolved the database: split, embedded or dev cluster.
  [[nodiscard]] DeploymentMode mode() const { return mode_; }

  /// Runnable executions waiting for a worker, over all shards; also published
  /// as the harvest.engine.queue_depth gauge.
  [[nodiscard]] Result<long long> queue_depth();

  /// Bumped whenever this process makes a run runnable; workers wait on it.
  [[nodiscard]] WorkSignal& work_signal();
  /// Every shard's connection URL, in shard order (may carry passwords).
  [[nodiscard]] std::vector<std::string> shard_urls() const;
  /// The URLs workers LISTEN on for other processes' starts, in shard order:
  /// the shard URLs, or behind a transaction pooler EngineConfig::listen_urls
  /// (empty: none, idle workers poll).
  [[nodiscard]] std::vector<std::string> listen_urls() const;
  /// The metric label for a workflow name: the name when registered, else
  /// "unknown" (labels never grow with what callers send).
  [[nodiscard]] std::string workflow_label(std::string_view workflow) const;

 private:
  friend class internal::ConnectorStarts;
  struct Shard {
    std::string url;
    std::unique_ptr<store::Pool> pool;
  };
  struct PreparedStart;
  struct PreparedSignal;
  Engine(EngineConfig config, WorkflowRegistry workflows, std::vector<std::string> urls,
         DeploymentMode mode);

  // start.cpp
  [[nodiscard]] Result<PreparedStart> prepare_start(const StartRequest& request) const;
  std::vector<Result<StartOutcome>> start_prepared(std::vector<Result<PreparedStart>>& prepared,
                                                   bool refuse_collisions = false);
  void start_immediate_on(size_t shard, std::vector<PreparedStart*>& items,
                          std::vector<Result<StartOutcome>*>& outcomes, bool refuse_collisions);
  // signal.cpp
  [[nodiscard]] Result<PreparedSignal> prepare_signal_with_start(
      const SignalWithStartRequest& request) const;
  std::vector<Result<SignalWithStartOutcome>> signal_with_start_prepared(
      std::vector<Result<PreparedSignal>>& prepared, bool refuse_collisions = false);
  void record_start(const std::string& workflow, const Result<StartOutcome>& r);
  // The shard holding `execution_id`, found by asking each in turn.
  Result<std::optional<size_t>> locate(const std::string& execution_id);
  Result<int> fire_deferred_on(size_t shard);
  // start.cpp and signal.cpp, for internal::ConnectorStarts: the batch calls
  // with each request's key replaced by its derived `conn:` key.
  std::vector<Result<internal::Derived<StartOutcome>>> start_batch_derived(
      std::vector<internal::DerivedStart> requests, bool refuse_collisions);
  std::vector<Result<internal::Derived<SignalWithStartOutcome>>> signal_with_start_batch_derived(
      std::vector<internal::DerivedSignalWithStart> requests, bool refuse_collisions);
  // cancel_terminate.cpp
  Result<StopOutcome> stop(const StopRequest& request, bool terminate);
  Result<BulkStopOutcome> stop_where(const StopFilter& filter, const std::string& reason,
                                     const std::string& requested_by, bool dry_run, bool terminate);
  // `writes`: a read-only shard fails the probe (unavailable).
  Status probe_shard(size_t shard, bool writes);

  EngineConfig config_;
  WorkflowRegistry workflows_;
  DeploymentMode mode_;
  std::vector<Shard> shards_;
  std::atomic<uint64_t> round_robin_{0};
  std::vector<store::PendingMigration> pending_at_open_;
  std::unique_ptr<WorkSignal> work_;
};

}  // namespace harvest::engine
