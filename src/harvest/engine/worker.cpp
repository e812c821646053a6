#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <list>
#include <optional>
#include <set>

#include <harvest/common/fault.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/common/json.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/history_writer.hpp>
#include <harvest/engine/run_outcome.hpp>
#include <harvest/engine/run_state.hpp>
#include <harvest/engine/work_signal.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::engine {

namespace {

// Sleeps up to `d`, waking early when stop is requested.
void nap(std::stop_token st, std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, st, d, [] { return false; });
}

}  // namespace

struct Worker::Claimed {
  size_t shard;
  ClaimedRun run;
};

Worker::Worker(Engine& engine, WorkerConfig config) : engine_(engine), config_(std::move(config)) {
  const std::string& instance = engine_.config().instance_id;
  if (config_.owner.empty()) {
    config_.owner =
        instance.empty() ? process_identity() : instance + "@" + new_uuid().substr(0, 8);
  }
  if (!instance.empty()) own_prefix_ = instance + "@";
  if (config_.concurrency == 0) {
    config_.concurrency = default_concurrency(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("HARVEST_WORKER_CONCURRENCY"); env && *env) {
      int n = 0;
      const std::string_view text(env);
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec == std::errc() && end == text.data() + text.size() && n >= 1 && n <= 4096) {
        config_.concurrency = n;
      } else {
        log::warn(
            "HARVEST_WORKER_CONCURRENCY '{}' is not a number from 1 to 4096; running {} "
            "run threads",
            text.substr(0, 32), config_.concurrency);
      }
    }
  }
  if (config_.concurrency < 1) config_.concurrency = 1;
  if (config_.claim_batch == 0) config_.claim_batch = 2 * static_cast<size_t>(config_.concurrency);
  for (size_t shard = 0; shard < engine_.shard_count(); ++shard) {
    writers_.push_back(std::make_unique<HistoryWriter>(engine_.pool(shard)));
  }
  for (const auto& name : engine_.workflows().names()) {
    const WorkflowDef* def = engine_.workflows().find(name);
    if (def && def->options.concurrency) {
      keyed_[name] = std::max(1, def->options.concurrency->max_per_key);
    }
  }
}

int Worker::default_concurrency(unsigned hardware_threads) {
  return static_cast<int>(std::clamp(8u * std::max(1u, hardware_threads), 16u, 256u));
}

Worker::~Worker() {
  stop();
}

void Worker::start() {
  if (!threads_.empty()) return;
  if (auto urls = engine_.listen_urls(); config_.listen && !urls.empty()) {
    listener_ = std::make_unique<WorkListener>(std::move(urls), engine_.work_signal());
    listener_->start();
  } else if (config_.listen) {
    log::info(
        "behind a transaction pooler with no listen URLs: idle workers find other processes' "
        "starts by polling every {} ms (set HARVEST_LISTEN_URLS to direct URLs to be woken at "
        "once)",
        config_.poll_interval.count());
  }
  for (int i = 0; i < config_.concurrency; ++i) {
    threads_.emplace_back([this](std::stop_token st) { run_loop(st); });
  }
  threads_.emplace_back([this](std::stop_token st) { heartbeat_loop(st); });
  threads_.emplace_back([this](std::stop_token st) { maintenance_loop(st); });
}

void Worker::stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
  if (listener_) listener_->stop();
  listener_.reset();
  release_queued();
}

Result<std::vector<Worker::Claimed>> Worker::claim(size_t limit) {
  const size_t n = engine_.shard_count();
  const size_t first = next_shard_.fetch_add(1) % n;
  const std::vector<std::string> workflows = engine_.workflows().names();
  std::vector<Claimed> out;
  std::optional<Error> error;
  for (size_t i = 0; i < n && out.size() < limit; ++i) {
    const size_t shard = (first + i) % n;
    auto conn = engine_.pool(shard).acquire();
    if (!conn) {
      error = conn.error();  // an unreachable shard must not starve the others
      continue;
    }
    std::optional<long long> cursor;
    {
      std::lock_guard lock(mu_);
      cursor = cursors_[shard];
    }
    auto runs = ExecutionStore(**conn).claim(workflows, config_.owner, config_.lease,
                                             limit - out.size(), own_prefix_, &cursor, keyed_);
    {
      std::lock_guard lock(mu_);
      cursors_[shard] = cursor;
    }
    if (!runs) {
      error = runs.error();
      continue;
    }
    std::lock_guard lock(mu_);
    for (auto& r : *runs) {
      active_.emplace(r.lease,
                      Active{shard, std::make_shared<std::atomic<bool>>(r.cancel_requested)});
      out.push_back(Claimed{shard, std::move(r)});
    }
  }
  if (out.empty() && error) return fail(*error);
  return out;
}

std::optional<Worker::Claimed> Worker::next(std::stop_token st) {
  while (!st.stop_requested()) {
    std::unique_lock lock(mu_);
    if (!queue_.empty()) {
      Claimed c = std::move(queue_.front());
      queue_.pop_front();
      return c;
    }
    if (claiming_) {
      // Another run thread is claiming for everyone: wait for its batch.
      queue_cv_.wait_for(lock, st, config_.poll_interval,
                         [&] { return !queue_.empty() || !claiming_; });
      continue;
    }
    claiming_ = true;
    lock.unlock();
    // Read the epoch before claiming: a start that commits after the claim
    // looked is then a change the wait below sees.
    const uint64_t seen = engine_.work_signal().epoch();
    auto claimed = claim(config_.claim_batch);
    lock.lock();
    claiming_ = false;
    if (claimed) {
      for (auto& c : *claimed) queue_.push_back(std::move(c));
    }
    queue_cv_.notify_all();
    note_claim(claimed ? nullptr : &claimed.error());
    if (!queue_.empty()) continue;
    lock.unlock();
    if (!claimed) {
      nap(st, config_.poll_interval * 5);
      continue;
    }
    engine_.work_signal().wait(seen, config_.poll_interval, st);
  }
  return std::nullopt;
}

void Worker::note_claim(const Error* failure) {
  // Every run thread claims in turn, so through a database outage each one
  // fails once per nap: one line when claims start failing, then one per
  // 10 s with the count, and one when they succeed again.
  const auto now = std::chrono::steady_clock::now();
  if (!failure) {
    if (claims_failing_) {
      log::info("worker claims work again ({} failed claims since the last report)",
                claim_failures_);
    }
    claims_failing_ = false;
    claim_failures_ = 0;
    return;
  }
  ++claim_failures_;
  if (!claims_failing_ || now - claim_failure_logged_ >= std::chrono::seconds(10)) {
    log::warn(
        "worker cannot claim work ({} failed claims since the last report; the next "
        "report in 10 s): {}",
        claim_failures_, failure->describe());
    claims_failing_ = true;
    claim_failures_ = 0;
    claim_failure_logged_ = now;
  }
}

void Worker::sweep_locks(size_t shard) {
  auto conn = engine_.pool(shard).acquire();
  auto r = conn ? ExecutionStore(**conn).sweep_locks() : fail(conn.error());
  // The next run in line finds the lock free at its periodic re-check.
  if (!r) log::warn("cannot hand on the durable locks of ended runs: {}", r.error().describe());
}

void Worker::forget(const std::string& lease) {
  std::lock_guard lock(mu_);
  active_.erase(lease);
}

void Worker::release_queued() {
  std::list<Claimed> queued;
  {
    std::lock_guard lock(mu_);
    queued.swap(queue_);
  }
  for (auto& c : queued) {
    forget(c.run.lease);
    auto conn = engine_.pool(c.shard).acquire();
    // On failure the lease lapses and the run resumes elsewhere.
    if (conn) (void)ExecutionStore(**conn).release(Fence{c.run.id, c.run.lease}, {});
  }
}

Result<bool> Worker::run_one() {
  auto c = claim(1);
  if (!c) return fail(c.error());
  if (c->empty()) return false;
  execute(std::move(c->front()));
  return true;
}

Result<bool> Worker::settle(size_t shard, const ClaimedRun& run,
                            const std::function<Result<bool>(ExecutionStore&)>& write) {
  forget(run.lease);
  auto conn = engine_.pool(shard).acquire();
  if (!conn) {
    log::warn("execution {}: cannot record outcome ({}); it resumes after its lease lapses", run.id,
              conn.error().describe());
    return fail(conn.error());
  }
  ExecutionStore store(**conn);
  Result<bool> r = write(store);
  if (!r) {
    log::warn("execution {}: cannot record outcome ({}); it resumes after its lease lapses", run.id,
              r.error().describe());
  }
  return r;
}

bool Worker::contain_crash_loop(size_t shard, const ClaimedRun& run, const WorkflowDef& def) {
  const int threshold = def.options.poison_pill_threshold;
  if (threshold <= 0 || run.crash_count < threshold) return false;
  const std::string error = fmt::format(
      "crashed_worker: the run's lease was taken over {} times since it last recorded a durable "
      "operation (its workers crashed, were OOM-killed or lost their lease at the same point); "
      "poison_pill_threshold is {}. "
      "It is not run again until replayed from the dead letters",
      run.crash_count, threshold);
  log::error("execution {} ({}): {}", run.id, run.workflow_name, error);
  auto done = settle(shard, run, [&](ExecutionStore& s) {
    return s.fail_crashed(Fence{run.id, run.lease}, error);
  });
  if (done && *done) {
    sweep_locks(shard);  // it may have died holding a durable lock
    engine_.metrics().increment(metrics::kEngineRunsCrashed, {{"workflow", run.workflow_name}});
    engine_.metrics().increment(metrics::kEngineRunsFailed, {{"workflow", run.workflow_name}});
  }
  return true;
}

void Worker::execute(Claimed c) {
  const size_t shard = c.shard;
  // The flag the claim registered for the run, raised by a lease renewal
  // that finds a cancel request.
  std::shared_ptr<std::atomic<bool>> cancel;
  {
    std::lock_guard lock(mu_);
    if (auto it = active_.find(c.run.lease); it != active_.end()) cancel = it->second.cancel;
  }
  if (!cancel) cancel = std::make_shared<std::atomic<bool>>(c.run.cancel_requested);
  RunState state(engine_, shard, *writers_.at(shard), std::move(c.run), cancel);
  const ClaimedRun& run = state.run();
  // Every line this thread logs while the run executes, harvest's and the
  // workflow's own, names the producer's trace.
  std::optional<log::ScopedFields> trace_fields;
  if (run.trace) trace_fields.emplace(fmt::format("trace_id={}", run.trace->trace_id()));
  const WorkflowDef* def = engine_.workflows().find(run.workflow_name);
  const auto started = std::chrono::steady_clock::now();
  if (contain_crash_loop(shard, run, *def)) return;
  // Made after the crash-loop check, so a contained run neither sweeps locks
  // nor wakes key waiters on the way out; destroyed before trace_fields, so
  // its lines name the trace too.
  RunOutcome outcome(*this, shard, state, *def, started);
  try {
    WorkflowContext ctx(state);
    Json output = def->fn(ctx, state.run().input);
    HARVEST_FAULT_POINT("worker.before_complete");
    outcome.returned(std::move(output));
  } catch (...) {
    // What recording the outcome throws (an injected crash in a history
    // write, say) is handled as the workflow's own throw would be.
    outcome.threw(std::current_exception());
  }
}

void Worker::run_loop(std::stop_token st) {
  while (!st.stop_requested()) {
    auto c = next(st);
    if (!c) continue;
    try {
      execute(std::move(*c));
    } catch (const fault::InjectedCrash&) {
      // This run thread is dead. When none is left, the runs queued for them
      // are as good as a crashed process's: their leases lapse.
      if (++crashed_ >= config_.concurrency) {
        std::lock_guard lock(mu_);
        for (const auto& q : queue_) active_.erase(q.run.lease);
        queue_.clear();
      }
      return;
    }
  }
}

void Worker::heartbeat_loop(std::stop_token st) {
  while (!st.stop_requested()) {
    nap(st, config_.lease / 3);
    std::map<size_t, std::vector<std::string>> leases;  // shard -> tokens
    {
      std::lock_guard lock(mu_);
      for (const auto& [lease, a] : active_) leases[a.shard].push_back(lease);
    }
    for (auto& [shard, tokens] : leases) {
      auto conn = engine_.pool(shard).acquire();
      if (!conn) continue;
      // A missed renewal is retried next beat.
      auto cancelled = ExecutionStore(**conn).renew_leases(tokens, config_.lease);
      if (!cancelled || cancelled->empty()) continue;
      std::lock_guard lock(mu_);
      for (const auto& lease : *cancelled) {
        if (auto it = active_.find(lease); it != active_.end()) it->second.cancel->store(true);
      }
    }
  }
}

void Worker::maintenance_loop(std::stop_token st) {
  auto next_purge = std::chrono::steady_clock::now() + config_.purge_interval;
  auto next_depth = std::chrono::steady_clock::now();
  std::set<size_t> analyzed;  // shards whose run tables have statistics
  while (!st.stop_requested()) {
    nap(st, config_.admission_interval);
    if (st.stop_requested()) break;
    if (auto r = engine_.fire_deferred(); !r) {
      log::warn("firing deferred starts failed: {}", r.error().describe());
    }
    if (std::chrono::steady_clock::now() >= next_depth) {
      (void)engine_.queue_depth();  // publishes the gauge; a failed probe is retried next time
      for (size_t shard = 0; shard < engine_.shard_count(); ++shard) {
        if (analyzed.contains(shard)) continue;
        auto conn = engine_.pool(shard).acquire();
        if (!conn) continue;
        // Checked once a second until true; a failure is retried then.
        if (auto r = ExecutionStore(**conn).analyze_if_never_analyzed(1000); r && *r) {
          analyzed.insert(shard);
        }
      }
      next_depth = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (std::chrono::steady_clock::now() >= next_purge) {
      if (auto r = engine_.purge(); !r)
        log::warn("retention purge failed: {}", r.error().describe());
      next_purge = std::chrono::steady_clock::now() + config_.purge_interval;
    }
  }
}

}  // namespace harvest::engine
