// The worker pool: claims runnable executions under a lease and runs them
// (ENG-3), and runs the engine's housekeeping (deferred starts, retention).
//
// Threads: `concurrency` run threads, one heartbeat thread renewing the
// leases of runs in progress, one maintenance thread firing deferred starts
// and purging. All are owned (jthread) and joined by `stop()`/the destructor.
// A run whose worker dies keeps its lease until it lapses; then any worker
// claims and resumes it, replaying recorded operations.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.hpp"

namespace harvest::engine {

struct WorkerConfig {
  // Runs executed at once. Default 4.
  int concurrency = 4;
  // How long a claimed run stays ours without renewal; a crashed worker's runs
  // are resumed elsewhere this long after its last renewal. Default 30 s.
  std::chrono::milliseconds lease{30000};
  // Idle poll interval for new work from other processes. Default 100 ms.
  std::chrono::milliseconds poll_interval{100};
  // Cadence of firing deferred (throttled) starts. Default 100 ms.
  std::chrono::milliseconds admission_interval{100};
  // Cadence of the retention purge. Default 60 s.
  std::chrono::milliseconds purge_interval{60000};
  // Lease owner name. Default: host:pid:random.
  std::string owner;
};

class Worker {
 public:
  // Keeps a reference to `engine`, which must outlive the worker.
  Worker(Engine& engine, WorkerConfig config = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void start();
  // Stops claiming, waits for runs in progress to reach a durable point.
  void stop();

  // Claims and runs one runnable execution on the calling thread. Returns
  // false when nothing was runnable. For tests and tools.
  [[nodiscard]] Result<bool> run_one();

  // Number of run threads that died from an injected crash (tests).
  [[nodiscard]] int crashed_threads() const { return crashed_.load(); }
  [[nodiscard]] const std::string& owner() const { return config_.owner; }

 private:
  void run_loop(std::stop_token st);
  void heartbeat_loop(std::stop_token st);
  void maintenance_loop(std::stop_token st);
  struct Claimed {
    size_t shard;
    // This claim's lease token (lease_owner): unique per claim, so two threads
    // of one worker can never both pass the fence for one execution.
    std::string lease;
    std::string id, workflow_name;
    std::optional<std::string> workflow_id;
    Json input;
    int attempt;
    int max_attempts;
  };
  // Claims from the shards in turn, starting after the last one that had work.
  Result<std::optional<Claimed>> claim();
  Result<std::optional<Claimed>> claim_on(size_t shard);
  void execute(const Claimed& c);
  Status settle(const Claimed& c, const std::string& sql, const store::Params& params);

  Engine& engine_;
  WorkerConfig config_;
  std::vector<std::jthread> threads_;
  std::mutex active_mu_;
  std::map<std::string, size_t> active_;  // lease token -> shard, for runs in progress
  std::atomic<size_t> next_shard_{0};
  std::atomic<int> crashed_{0};
};

}  // namespace harvest::engine
