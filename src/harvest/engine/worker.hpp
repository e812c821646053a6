// The worker pool: claims runnable executions under a lease and runs them
// (ENG-3), and runs the engine's housekeeping (deferred starts, retention).
//
// Claims are batched: an idle run thread claims up to `claim_batch` runs in
// one query (their history read in one more) into a local queue the run
// threads drain, so a claim costs a fraction of a round trip per run. Idle
// threads wait for work on the engine's WorkSignal — bumped at once by starts
// and signals of this process, and by NOTIFY harvest_work from other
// processes (a LISTEN thread per shard) — with `poll_interval` as the
// fallback for timers falling due and lapsed leases.
//
// Threads: `concurrency` run threads, one heartbeat thread renewing the
// leases of claimed runs (queued or in progress), one maintenance thread
// firing deferred starts and purging, and the LISTEN threads. All are owned
// (jthread) and joined by `stop()`/the destructor. A run whose worker dies
// keeps its lease until it lapses; then any worker claims and resumes it,
// replaying recorded operations — at once, for a worker of the same
// `instance_id` (EngineConfig) restarted after a crash.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <harvest/engine/engine.hpp>

namespace harvest::engine {

// Internal types the worker keeps (<harvest/engine/execution_store.hpp>,
// history_writer.hpp, work_signal.hpp).
struct ClaimedRun;
class ExecutionStore;
class HistoryWriter;
class WorkListener;

/// Tuning of a Worker; the defaults suit most deployments. Copied by the
/// worker at construction.
struct WorkerConfig {
  /// Runs executed at once. 0 (the default): $HARVEST_WORKER_CONCURRENCY
  /// when set, else Worker::default_concurrency() — sized for runs that
  /// mostly wait (on PostgreSQL, on the services their steps call), not for
  /// CPU-bound ones, which want about one per core.
  int concurrency = 0;
  /// How long a claimed run stays ours without renewal; a crashed worker's runs
  /// are resumed elsewhere this long after its last renewal. Default 30 s.
  std::chrono::milliseconds lease{30000};
  /// Fallback poll for work nothing announced (timers, lapsed leases).
  /// Default 100 ms.
  std::chrono::milliseconds poll_interval{100};
  /// Cadence of firing deferred (throttled) starts. Default 100 ms.
  std::chrono::milliseconds admission_interval{100};
  /// Cadence of the retention purge. Default 60 s.
  std::chrono::milliseconds purge_interval{60000};
  /// Lease owner name. Default: "<instance_id>@<random>" when the engine has
  /// an instance id, else host:pid:random.
  std::string owner;
  /// Runs claimed per query. 0: twice `concurrency`. Default 0.
  size_t claim_batch = 0;
  /// LISTEN for other processes' starts (NOTIFY harvest_work). Default true.
  bool listen = true;
};

/// A pool of threads running the engine's workflows (see the file comment).
/// Construct it on an open Engine, call start(), and stop() or destroy it
/// before the engine. start(), stop() and the destructor are for the owning
/// thread only; the worker owns its threads and joins them in stop().
class Worker {
 public:
  /// Keeps a reference to `engine`, which must outlive the worker.
  Worker(Engine& engine, WorkerConfig config = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Starts the run, heartbeat and maintenance threads (and the LISTEN
  /// threads when `listen`) and returns. A no-op while already running.
  void start();
  /// Stops claiming, lets runs in progress reach a durable point and hands the
  /// claimed-but-unstarted ones back at once.
  void stop();

  /// Claims and runs one runnable execution on the calling thread. Returns
  /// false when nothing was runnable. For tests and tools.
  [[nodiscard]] Result<bool> run_one();

  /// Number of run threads that died from an injected crash (tests).
  [[nodiscard]] int crashed_threads() const { return crashed_.load(); }
  /// The lease owner name this worker claims under (WorkerConfig::owner, or
  /// the generated one).
  [[nodiscard]] const std::string& owner() const { return config_.owner; }
  /// The run threads this worker runs (WorkerConfig::concurrency resolved).
  [[nodiscard]] int concurrency() const { return config_.concurrency; }
  /// The run threads of a worker that names none: 8 per hardware thread, at
  /// least 16, at most 256. A run thread holds no connection while its
  /// workflow runs (each durable operation borrows one and the history
  /// writer batches them), so threads waiting on I/O cost a stack, not a
  /// PostgreSQL backend.
  [[nodiscard]] static int default_concurrency(unsigned hardware_threads);

 private:
  struct Claimed;    // a claimed run and its shard (worker.cpp)
  class RunOutcome;  // how a run leaves the worker (run_outcome.hpp)
  void run_loop(std::stop_token st);
  void heartbeat_loop(std::stop_token st);
  void maintenance_loop(std::stop_token st);
  /// Claims from the shards in turn, starting after the last one that had
  /// work, up to `limit` runs; they are registered for lease renewal.
  Result<std::vector<Claimed>> claim(size_t limit);
  /// The next claimed run for a run thread, claiming a batch when the queue is
  /// empty; std::nullopt when there is no work (after waiting for some).
  std::optional<Claimed> next(std::stop_token st);
  void execute(Claimed c);
  /// Writes an outcome fenced on the run's lease (a run taken over by another
  /// worker is left to it). On failure the lease lapses and the run resumes
  /// elsewhere.
  Result<bool> settle(size_t shard, const ClaimedRun& run,
                      const std::function<Result<bool>(ExecutionStore&)>& write);
  /// ENG-18: a run taken over from crashed holders `poison_pill_threshold`
  /// times in a row is failed into the dead letters instead of executed.
  /// True when it was (or its outcome could not be written).
  bool contain_crash_loop(size_t shard, const ClaimedRun& run, const WorkflowDef& def);
  void forget(const std::string& lease);
  /// Logs a claim that failed (`failure`) or succeeded, at most one line per
  /// 10 s while claims keep failing. Caller holds mu_.
  void note_claim(const Error* failure);
  /// ENG-20: hands the durable locks of ended runs on to the next in line.
  void sweep_locks(size_t shard);
  /// Hands back claimed runs that never started (on stop).
  void release_queued();

  Engine& engine_;
  WorkerConfig config_;
  std::optional<std::string> own_prefix_;  ///< "<instance_id>@"
  std::vector<std::jthread> threads_;
  std::unique_ptr<WorkListener> listener_;

  /// A claimed run not yet settled: its shard, and the flag its RunState
  /// reads to deliver a cancel request (raised by the claim or a renewal).
  struct Active {
    size_t shard;
    std::shared_ptr<std::atomic<bool>> cancel;
  };

  std::mutex mu_;  ///< guards queue_, claiming_, active_
  std::condition_variable_any queue_cv_;
  std::list<Claimed> queue_;
  bool claiming_ = false;
  /// Failed claims since the last line logged about them, whether claims are
  /// failing, and when the last such line was logged. Under mu_.
  int claim_failures_ = 0;
  bool claims_failing_ = false;
  std::chrono::steady_clock::time_point claim_failure_logged_{};
  std::map<std::string, Active> active_;  ///< lease token -> the run, claimed and not settled
  std::atomic<size_t> next_shard_{0};
  /// Per shard: where the runnable scan starts (ExecutionStore::claim). Under mu_.
  std::map<size_t, std::optional<long long>> cursors_;
  std::atomic<int> crashed_{0};
  /// Per shard: the group commit of this worker's run histories.
  std::vector<std::unique_ptr<HistoryWriter>> writers_;
  /// Workflows with per-key concurrency -> max_per_key (ENG-19).
  std::map<std::string, int> keyed_;
};

}  // namespace harvest::engine
