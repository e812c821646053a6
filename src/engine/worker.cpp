#include "engine/worker.hpp"

#include <fmt/format.h>

#include <condition_variable>

#include "common/fault.hpp"
#include "common/ids.hpp"
#include "common/log.hpp"
#include "engine/run_state.hpp"

namespace harvest::engine {

namespace {

// Sleeps up to `d`, waking early when stop is requested.
void nap(std::stop_token st, std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, st, d, [] { return false; });
}

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

}  // namespace

Worker::Worker(Engine& engine, WorkerConfig config) : engine_(engine), config_(std::move(config)) {
  if (config_.owner.empty()) config_.owner = process_identity();
  if (config_.concurrency < 1) config_.concurrency = 1;
}

Worker::~Worker() {
  stop();
}

void Worker::start() {
  if (!threads_.empty()) return;
  for (int i = 0; i < config_.concurrency; ++i) {
    threads_.emplace_back([this](std::stop_token st) { run_loop(st); });
  }
  threads_.emplace_back([this](std::stop_token st) { heartbeat_loop(st); });
  threads_.emplace_back([this](std::stop_token st) { maintenance_loop(st); });
}

void Worker::stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
}

Result<std::optional<Worker::Claimed>> Worker::claim() {
  const size_t n = engine_.shard_count();
  const size_t first = next_shard_.fetch_add(1) % n;
  std::optional<Error> error;
  for (size_t i = 0; i < n; ++i) {
    auto c = claim_on((first + i) % n);
    if (!c) {
      error = c.error();  // an unreachable shard must not starve the others
      continue;
    }
    if (*c) return c;
  }
  if (error) return fail(*error);
  return std::optional<Claimed>{};
}

Result<std::optional<Worker::Claimed>> Worker::claim_on(size_t shard) {
  auto conn = engine_.pool(shard).acquire();
  if (!conn) return fail(conn.error());
  std::string names = "{";
  bool first = true;
  for (const auto& n : engine_.workflows().names()) {
    names += (first ? "" : ",") + Json(n).dump();
    first = false;
  }
  names += "}";
  const std::string lease = config_.owner + "/" + new_uuid().substr(0, 13);
  // Two statements, each walking its own partial index in order: runnable
  // work first, then runs whose worker's lease lapsed.
  static const char* kWhere[] = {
      "status IN ('pending', 'waiting') AND run_after <= now() ORDER BY run_after",
      "status = 'running' AND lease_expires_at < now() ORDER BY lease_expires_at"};
  for (const char* where : kWhere) {
    auto r = (*conn)->exec(
        fmt::format(
            "WITH c AS (SELECT id FROM harvest_workflow_executions "
            "  WHERE workflow_name = ANY($3::text[]) AND {} LIMIT 1 FOR UPDATE SKIP LOCKED) "
            "UPDATE harvest_workflow_executions e SET status = 'running', lease_owner = $1, "
            "  lease_expires_at = now() + $2 * interval '1 millisecond', updated_at = now() "
            "FROM c WHERE e.id = c.id "
            "RETURNING e.id, e.workflow_name, e.workflow_id, e.input::text AS input, e.attempt, "
            "  e.max_attempts",
            where),
        {lease, ms(config_.lease), names});
    if (!r) return fail(r.error());
    if (r->empty()) continue;
    Claimed c{shard,
              lease,
              r->get(0, "id"),
              r->get(0, "workflow_name"),
              r->get_opt(0, "workflow_id"),
              Json::parse(r->get(0, "input")),
              static_cast<int>(r->get_int(0, "attempt")),
              static_cast<int>(r->get_int(0, "max_attempts"))};
    return std::optional<Claimed>{std::move(c)};
  }
  return std::optional<Claimed>{};
}

Result<bool> Worker::run_one() {
  auto c = claim();
  if (!c) return fail(c.error());
  if (!*c) return false;
  {
    std::lock_guard lock(active_mu_);
    active_.emplace((*c)->lease, (*c)->shard);
  }
  execute(**c);
  return true;
}

// Writes the run's outcome, fenced on this claim's lease (a run taken over by
// another worker is left to that worker).
Status Worker::settle(const Claimed& c, const std::string& sql, const store::Params& params) {
  {
    std::lock_guard lock(active_mu_);
    active_.erase(c.lease);
  }
  auto conn = engine_.pool(c.shard).acquire();
  if (!conn) {
    log::warn("execution {}: cannot record outcome ({}); it resumes after its lease lapses", c.id,
              conn.error().describe());
    return fail(conn.error());
  }
  auto r = (*conn)->exec(sql, params);
  if (!r) {
    log::warn("execution {}: cannot record outcome ({}); it resumes after its lease lapses", c.id,
              r.error().describe());
    return fail(r.error());
  }
  return {};
}

void Worker::execute(const Claimed& c) {
  const WorkflowDef* def = engine_.workflows().find(c.workflow_name);
  RunState state(engine_, c.lease, config_.lease);
  state.shard = c.shard;
  state.execution_id = c.id;
  const auto started = std::chrono::steady_clock::now();
  auto observe = [&] {
    engine_.metrics().observe(
        metrics::kEngineRunSeconds, {{"workflow", c.workflow_name}},
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  };
  state.workflow_id = c.workflow_id;
  state.workflow_name = c.workflow_name;
  state.attempt = c.attempt;
  state.input = c.input;
  const std::string fence = "WHERE id = $1 AND lease_owner = $2 AND status = 'running'";
  // The attempt failed: retry with backoff, or record the failure and put the
  // run in the engine's dead letters once the attempts are used up.
  auto fail_attempt = [&](const std::string& what) {
    const std::string error = to_valid_utf8(what);
    if (c.attempt < c.max_attempts) {
      auto backoff = def->options.retry_backoff * (1LL << std::min(c.attempt - 1, 20));
      log::warn("execution {} ({}) attempt {}/{} failed: {}; retrying in {} ms", c.id,
                c.workflow_name, c.attempt, c.max_attempts, error, backoff.count());
      settle(c,
             "WITH retry AS (UPDATE harvest_workflow_executions SET status = 'pending', "
             "attempt = attempt + 1, error = $3, lease_owner = NULL, lease_expires_at = NULL, "
             "run_after = now() + $4 * interval '1 millisecond', updated_at = now() " +
                 fence +
                 " RETURNING id) INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
                 "SELECT id, 'AttemptFailed', jsonb_build_object('attempt', $5::int, 'error', "
                 "$3::text) "
                 "FROM retry",
             {c.id, c.lease, error, ms(backoff), std::to_string(c.attempt)});
    } else {
      log::error("execution {} ({}) failed after {} attempts: {}", c.id, c.workflow_name, c.attempt,
                 error);
      settle(c,
             "WITH failed AS (UPDATE harvest_workflow_executions SET status = 'failed', "
             "error = $3, completed_at = now(), lease_owner = NULL, lease_expires_at = NULL, "
             "updated_at = now() " +
                 fence +
                 " RETURNING id, workflow_name, workflow_id, attempt), "
                 "event AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
                 "SELECT id, 'WorkflowFailed', jsonb_build_object('error', $3::text) FROM failed) "
                 // The run lands in the engine's dead letters (ENG-14).
                 "INSERT INTO harvest_engine_dead_letters "
                 "(execution_id, workflow_name, workflow_id, error, attempts) "
                 "SELECT id, workflow_name, workflow_id, $3, attempt FROM failed "
                 "ON CONFLICT (execution_id) DO UPDATE SET error = EXCLUDED.error, "
                 "attempts = EXCLUDED.attempts, failed_at = now(), replayed_at = NULL",
             {c.id, c.lease, error});
      engine_.metrics().increment(metrics::kEngineRunsFailed, {{"workflow", c.workflow_name}});
      observe();
    }
  };
  try {
    state.load();
    WorkflowContext ctx(state);
    Json output = def->fn(ctx, c.input);
    HARVEST_FAULT_POINT("worker.before_complete");
    auto done = settle(
        c,
        "WITH done AS (UPDATE harvest_workflow_executions SET status = 'completed', "
        "output = $3::jsonb, completed_at = now(), lease_owner = NULL, lease_expires_at = NULL, "
        "updated_at = now() " +
            fence +
            " RETURNING id) "
            "INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
            "SELECT id, 'WorkflowCompleted', $3::jsonb FROM done",
        {c.id, c.lease, output.dump()});
    if (!done && is_permanent(done.error())) {
      // An output PostgreSQL cannot store (e.g. "\u0000") fails the attempt
      // rather than leaving the run to be re-leased forever.
      fail_attempt("cannot record the workflow's output: " + done.error().message);
      return;
    }
    engine_.metrics().increment(metrics::kEngineRunsCompleted, {{"workflow", c.workflow_name}});
    observe();
  } catch (const Suspension& s) {
    long long until_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(s.until.time_since_epoch()).count();
    // A signal staged after `load()` bumped signal_seq: stay runnable instead
    // of sleeping through it.
    (void)settle(c,  // on failure the lease lapses and the run resumes elsewhere
                 "UPDATE harvest_workflow_executions SET status = 'waiting', lease_owner = NULL, "
                 "lease_expires_at = NULL, updated_at = now(), run_after = CASE WHEN signal_seq > "
                 "$3 THEN now() ELSE to_timestamp($4::double precision / 1000) END " +
                     fence,
                 {c.id, c.lease, std::to_string(state.signal_seq_seen), std::to_string(until_ms)});
  } catch (const LeaseLost&) {
    log::warn("execution {}: lease lost to another worker; stopping this run", c.id);
    std::lock_guard lock(active_mu_);
    active_.erase(c.lease);
  } catch (const HistoryUnavailable& h) {
    log::warn("execution {}: history unavailable ({}); retrying shortly", c.id, h.error.message);
    (void)settle(c,  // on failure the lease lapses and the run resumes elsewhere
                 "UPDATE harvest_workflow_executions SET status = 'pending', lease_owner = NULL, "
                 "lease_expires_at = NULL, run_after = now() + interval '1 second' " +
                     fence,
                 {c.id, c.lease});
  } catch (const fault::InjectedCrash&) {
    // The component "died" here: no outcome is written and the lease is not
    // renewed, exactly as if the process had been killed.
    std::lock_guard lock(active_mu_);
    active_.erase(c.lease);
    throw;
  } catch (const std::exception& e) {
    fail_attempt(e.what());
  } catch (...) {
    fail_attempt("the workflow threw a non-standard exception");
  }
}

void Worker::run_loop(std::stop_token st) {
  while (!st.stop_requested()) {
    auto c = claim();
    if (!c) {
      log::warn("worker cannot claim work: {}", c.error().describe());
      nap(st, config_.poll_interval * 5);
      continue;
    }
    if (!*c) {
      nap(st, config_.poll_interval);
      continue;
    }
    {
      std::lock_guard lock(active_mu_);
      active_.emplace((*c)->lease, (*c)->shard);
    }
    try {
      execute(**c);
    } catch (const fault::InjectedCrash&) {
      ++crashed_;
      return;  // this run thread is dead
    }
  }
}

void Worker::heartbeat_loop(std::stop_token st) {
  while (!st.stop_requested()) {
    nap(st, config_.lease / 3);
    std::map<size_t, std::string> leases;  // shard -> '{"token","token"}'
    {
      std::lock_guard lock(active_mu_);
      for (const auto& [lease, shard] : active_) {
        auto& list = leases[shard];
        list += (list.empty() ? "{" : ",") + Json(lease).dump();
      }
    }
    for (auto& [shard, list] : leases) {
      auto conn = engine_.pool(shard).acquire();
      if (!conn) continue;
      (void)(*conn)->exec(  // a missed renewal is retried next beat
          "UPDATE harvest_workflow_executions SET lease_expires_at = now() + $2 * interval "
          "'1 millisecond' WHERE lease_owner = ANY($1::text[]) AND status = 'running'",
          {list + "}", ms(config_.lease)});
    }
  }
}

void Worker::maintenance_loop(std::stop_token st) {
  auto next_purge = std::chrono::steady_clock::now() + config_.purge_interval;
  auto next_depth = std::chrono::steady_clock::now();
  while (!st.stop_requested()) {
    nap(st, config_.admission_interval);
    if (st.stop_requested()) break;
    if (auto r = engine_.fire_deferred(); !r) {
      log::warn("firing deferred starts failed: {}", r.error().describe());
    }
    if (std::chrono::steady_clock::now() >= next_depth) {
      (void)engine_.queue_depth();  // publishes the gauge; a failed probe is retried next time
      next_depth = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (std::chrono::steady_clock::now() >= next_purge) {
      if (auto r = engine_.purge(); !r) log::warn("retention purge failed: {}", r.error().describe());
      next_purge = std::chrono::steady_clock::now() + config_.purge_interval;
    }
  }
}

}  // namespace harvest::engine
