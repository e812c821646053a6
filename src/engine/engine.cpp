#include "engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/ids.hpp"
#include "common/log.hpp"
#include "store/dev_cluster.hpp"

harvest::store::MigrationSet harvest_migrations_engine();

namespace harvest::engine {

namespace {

constexpr size_t kMaxKeyLength = 512;

std::string env_or(const std::string& value, const char* env) {
  if (!value.empty()) return value;
  const char* v = std::getenv(env);
  return v ? std::string(v) : std::string();
}

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

std::string seconds_param(std::chrono::seconds s) {
  return std::to_string(s.count());
}

// Inserts the execution row and its WorkflowStarted event. Returns the id of
// the new execution, or std::nullopt when the workflow_id already names one.
// Inserts the execution row and its WorkflowStarted event in one statement
// (atomic on its own, one round trip). Returns the id of the new execution
// (`id`, or a fresh one), or std::nullopt when the workflow_id already names
// one.
Result<std::optional<std::string>> insert_execution(store::Connection& conn, const WorkflowDef& def,
                                                    const std::optional<std::string>& workflow_id,
                                                    const Json& input, std::string_view source,
                                                    const std::optional<std::string>& source_ref,
                                                    std::string id = new_uuid()) {
  auto ins = conn.exec(
      "WITH e AS (INSERT INTO harvest_workflow_executions "
      "(id, workflow_name, workflow_id, status, input, start_source, start_source_ref, "
      "max_attempts) VALUES ($1, $2, $3, 'pending', $4::jsonb, $5, $6, $7) "
      "ON CONFLICT (workflow_name, workflow_id) DO NOTHING RETURNING id) "
      "INSERT INTO harvest_workflow_events (execution_id, kind, name, payload) "
      "SELECT id, 'WorkflowStarted', $2, jsonb_build_object('start_source', $5::text, "
      "'start_source_ref', $6::text) FROM e RETURNING execution_id",
      {id, def.name, workflow_id, input.dump(), std::string(source), source_ref,
       std::to_string(std::max(1, def.options.max_attempts))});
  if (!ins) return fail(ins.error());
  if (ins->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{std::move(id)};
}

// Starts a new window for `workflow` when the current one has elapsed and
// returns the tokens used in it, and whether earlier starts are still queued.
// Locks the workflow's throttle row for the rest of the transaction.
Result<store::PgResult> refresh_throttle_window(store::Connection& conn,
                                                const std::string& workflow,
                                                const ThrottlePolicy& policy) {
  return conn.exec(
      "UPDATE harvest_admission_throttle SET "
      "used = CASE WHEN window_started_at + $2 * interval '1 millisecond' <= now() THEN 0 "
      "ELSE used END, "
      "window_started_at = CASE WHEN window_started_at + $2 * interval '1 millisecond' <= now() "
      "THEN now() ELSE window_started_at END "
      "WHERE workflow_name = $1 RETURNING used, "
      "EXISTS (SELECT 1 FROM harvest_deferred_starts d WHERE d.workflow_name = $1) AS queued",
      {workflow, std::to_string(policy.period.count())});
}

Result<std::string> existing_execution(store::Connection& conn, const std::string& workflow,
                                       const std::string& workflow_id) {
  auto r = conn.exec(
      "SELECT id FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2",
      {workflow, workflow_id});
  if (!r) return fail(r.error());
  if (r->empty()) {
    return fail(Error::transient_error(
        fmt::format("execution {}/{} vanished during start; retry", workflow, workflow_id)));
  }
  return r->get(0, "id");
}

}  // namespace

std::string_view to_string(StartSource source) {
  switch (source) {
    case StartSource::kApi:
      return "api";
    case StartSource::kClient:
      return "client";
    case StartSource::kBroker:
      return "broker";
    case StartSource::kChild:
      return "child";
  }
  return "client";
}

std::string_view to_string(StartOutcomeKind kind) {
  switch (kind) {
    case StartOutcomeKind::kStarted:
      return "started";
    case StartOutcomeKind::kIdempotentReplay:
      return "idempotent_replay";
    case StartOutcomeKind::kDeferred:
      return "deferred";
  }
  return "started";
}

std::optional<std::chrono::seconds> RetentionConfig::effective_max_age(
    const std::string& workflow) const {
  if (auto it = per_workflow.find(workflow); it != per_workflow.end()) return it->second;
  return max_age;
}

store::MigrationSet engine_migrations() {
  return harvest_migrations_engine();
}

Status check_caller_key(const std::optional<std::string>& key) {
  if (key && std::string_view(*key).starts_with(kReservedKeyPrefix)) {
    return fail(Error::bad_request(fmt::format(
        "idempotency key '{}' uses the reserved prefix '{}', which only harvest's broker "
        "connectors may write; choose another key",
        *key, kReservedKeyPrefix)));
  }
  return {};
}

Engine::Engine(EngineConfig config, WorkflowRegistry workflows, std::vector<std::string> urls,
               DeploymentMode mode)
    : config_(std::move(config)), workflows_(std::move(workflows)), mode_(mode) {
  if (!config_.metrics) config_.metrics = std::make_shared<metrics::NoopMetrics>();
  for (auto& url : urls) {
    auto pool = std::make_unique<store::Pool>(
        store::PoolConfig{url, config_.pool_size, config_.pool_acquire_timeout});
    shards_.push_back(Shard{std::move(url), std::move(pool)});
  }
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::open(EngineConfig config, WorkflowRegistry workflows,
                                             std::vector<store::MigrationSet> plugin_migrations) {
  config.profile = env_or(config.profile, "HARVEST_PROFILE");
  config.harvest_database_url = env_or(config.harvest_database_url, "HARVEST_HARVEST_DATABASE_URL");
  config.database_url = env_or(config.database_url, "HARVEST_DATABASE_URL");
  const bool dev = config.profile == "dev";
  if (config.shard_urls.empty()) {
    std::string list = env_or("", "HARVEST_SHARD_URLS");
    for (size_t pos = 0; !list.empty() && pos <= list.size();) {
      size_t comma = list.find(',', pos);
      std::string u =
          list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!u.empty()) config.shard_urls.push_back(u);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  std::vector<std::string> urls;
  DeploymentMode mode;
  if (!config.shard_urls.empty()) {
    urls = config.shard_urls;  // the shards are the harvest databases
    mode = DeploymentMode::kSplit;
  } else if (!config.harvest_database_url.empty()) {
    urls = {config.harvest_database_url};
    mode = DeploymentMode::kSplit;
  } else if (!config.database_url.empty()) {
    urls = {config.database_url};
    mode = DeploymentMode::kEmbedded;
  } else if (dev) {
    auto dev_url = store::ensure_dev_cluster();
    if (!dev_url) return fail(dev_url.error());
    urls = {*dev_url};
    mode = DeploymentMode::kDevCluster;
  } else {
    return fail(Error::config(
        "no database configured: set HARVEST_DATABASE_URL (or HARVEST_HARVEST_DATABASE_URL for a "
        "separate harvest database, or HARVEST_SHARD_URLS for several), or HARVEST_PROFILE=dev "
        "for a private local cluster"));
  }

  std::unique_ptr<Engine> engine(
      new Engine(std::move(config), std::move(workflows), std::move(urls), mode));
  std::vector<store::MigrationSet> sets{engine_migrations()};
  for (auto& s : plugin_migrations) sets.push_back(std::move(s));
  // Every shard carries the full schema (plugin tables included). The first
  // shard must answer; another that does not is reported and skipped, so one
  // shard being down does not keep the rest from serving.
  for (size_t i = 0; i < engine->shards_.size(); ++i) {
    auto conn = engine->shards_[i].pool->acquire();
    if (!conn && i > 0) {
      log::warn("shard {} is unreachable at start-up ({}); its migrations were not checked", i,
                conn.error().describe());
      continue;
    }
    if (!conn) return fail(conn.error());
    if (dev) {
      auto applied = store::apply_migrations(**conn, sets);
      if (!applied) return fail(applied.error());
    } else {
      auto pending = store::pending_migrations(**conn, sets);
      if (!pending) return fail(pending.error());
      for (const auto& p : *pending) {
        log::warn("pending migration {}{}: run `harvest migrate` before serving traffic", p.label(),
                  engine->shards_.size() > 1 ? fmt::format(" on shard {}", i) : "");
      }
      if (i == 0) engine->pending_at_open_ = *pending;
    }
  }
  return engine;
}

bool Engine::has_deferred_admission(std::string_view workflow) const {
  const WorkflowDef* def = workflows_.find(workflow);
  return def && def->options.defers_admission();
}

size_t Engine::route(const std::string& workflow, const std::optional<std::string>& workflow_id,
                     const std::optional<std::string>& key) {
  if (shards_.size() == 1) return 0;
  const std::optional<std::string>& by = workflow_id ? workflow_id : key;
  if (!by) return round_robin_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
  // FNV-1a 64: stable across builds and processes, unlike std::hash.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::string_view part) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
    h *= 1099511628211ULL;
  };
  mix(workflow);
  mix(*by);
  return h % shards_.size();
}

Result<std::optional<size_t>> Engine::locate(const std::string& execution_id) {
  // Not a uuid: no such execution (and the lookups below stay on the primary key).
  if (!is_uuid(execution_id)) return std::optional<size_t>{};
  for (size_t i = 0; i < shards_.size(); ++i) {
    auto conn = shards_[i].pool->acquire();
    if (!conn) return fail(conn.error());
    auto r = (*conn)->exec("SELECT 1 FROM harvest_workflow_executions WHERE id = $1::uuid",
                           {execution_id});
    if (!r) return fail(r.error());
    if (!r->empty()) return std::optional<size_t>{i};
  }
  return std::optional<size_t>{};
}

std::vector<store::PendingMigration> Engine::pending_migrations_at_open() const {
  return pending_at_open_;
}

void Engine::record_start(const std::string& workflow, const Result<StartOutcome>& r) {
  std::string outcome =
      r ? std::string(to_string(r->kind)) : (should_retry(r.error()) ? "transient" : "rejected");
  config_.metrics->increment(metrics::kEngineStarts,
                             {{"workflow", workflow}, {"outcome", outcome}});
}

Result<StartOutcome> Engine::start(const StartRequest& request) {
  if (auto ok = check_caller_key(request.idempotency_key); !ok) return fail(ok.error());
  return start_checked(request);
}

Result<StartOutcome> Engine::start_derived(StartRequest request, const DerivedKeyPass& key) {
  request.idempotency_key = key.key();
  return start_checked(request);
}

Result<StartOutcome> Engine::start_checked(const StartRequest& request) {
  auto conn = pool(route(request.workflow, request.workflow_id, request.idempotency_key)).acquire();
  if (!conn) {
    Result<StartOutcome> r = fail(conn.error());
    record_start(request.workflow, r);
    return r;
  }
  auto r = start_on(**conn, request, true);
  record_start(request.workflow, r);
  return r;
}

Result<StartOutcome> Engine::start_in_transaction(PGconn* raw, const StartRequest& request) {
  if (auto ok = check_caller_key(request.idempotency_key); !ok) return fail(ok.error());
  auto conn = store::Connection::borrow(raw);
  if (!conn->in_transaction()) {
    return fail(Error::bad_request(
        "start_in_transaction needs a connection inside an open transaction (BEGIN first)"));
  }
  auto r = start_on(*conn, request, false);
  record_start(request.workflow, r);
  return r;
}

Result<StartOutcome> Engine::start_on(store::Connection& conn, const StartRequest& req,
                                      bool own_transaction) {
  const WorkflowDef* def = workflows_.find(req.workflow);
  if (!def) return fail(Error::not_found(fmt::format("unknown workflow '{}'", req.workflow)));
  // A batched workflow's input is the array of its admissions.
  if (auto bad = def->validate_input(def->options.batch ? Json::array({req.input}) : req.input)) {
    return fail(Error::invalid_input(
        fmt::format("input does not match workflow '{}': {}", req.workflow, *bad)));
  }
  if (req.idempotency_key) {
    if (req.idempotency_key->empty() || req.idempotency_key->size() > kMaxKeyLength) {
      return fail(Error::bad_request(
          fmt::format("idempotency key must be 1..{} bytes long", kMaxKeyLength)));
    }
    if (def->options.defers_admission()) {
      return fail(Error::bad_request(fmt::format(
          "workflow '{}' has a {} admission policy, which defers starts and has no "
          "execution id to return for an idempotency key; omit the key and use workflow_id "
          "for deduplication",
          req.workflow,
          def->options.throttle ? "throttle" : (def->options.debounce ? "debounce" : "batch"))));
    }
  }
  if (req.workflow_id && req.workflow_id->empty()) {
    return fail(Error::bad_request("workflow_id must not be empty"));
  }

  const std::string source(to_string(req.source));
  if (!def->options.defers_admission() && !req.idempotency_key) {
    // The common start is a single statement: atomic without a transaction
    // of its own, one round trip.
    auto id = insert_execution(conn, *def, req.workflow_id, req.input, source, req.source_ref);
    if (!id) return fail(id.error());
    if (*id) return StartOutcome{StartOutcomeKind::kStarted, **id};
    auto existing = existing_execution(conn, def->name, *req.workflow_id);
    if (!existing) return fail(existing.error());
    return StartOutcome{StartOutcomeKind::kIdempotentReplay, *existing};
  }

  std::optional<store::Transaction> tx;
  if (own_transaction) {
    auto t = store::Transaction::begin(conn);
    if (!t) return fail(t.error());
    tx.emplace(std::move(*t));
  }
  auto finish = [&](StartOutcome outcome) -> Result<StartOutcome> {
    if (tx) {
      if (auto c = tx->commit(); !c) return fail(c.error());
    }
    return outcome;
  };

  if (def->options.debounce) {
    if (!req.workflow_id) {
      return fail(Error::bad_request(fmt::format(
          "workflow '{}' is debounced: a start needs a workflow_id to collapse on", req.workflow)));
    }
    // Trailing-edge debounce: every start pushes the firing time out and
    // replaces the input; the maintenance loop fires it once quiet.
    auto d = conn.exec(
        "INSERT INTO harvest_debounce (workflow_name, workflow_id, input, start_source, "
        "start_source_ref, fire_at) VALUES ($1, $2, $3::jsonb, $4, $5, now() + $6 * interval "
        "'1 millisecond') ON CONFLICT (workflow_name, workflow_id) DO UPDATE SET "
        "input = EXCLUDED.input, start_source = EXCLUDED.start_source, "
        "start_source_ref = EXCLUDED.start_source_ref, fire_at = EXCLUDED.fire_at, pending = true",
        {def->name, req.workflow_id, req.input.dump(), source, req.source_ref,
         std::to_string(def->options.debounce->window.count())});
    if (!d) return fail(d.error());
    return finish({StartOutcomeKind::kDeferred, std::nullopt});
  }

  if (def->options.batch) {
    auto b = conn.exec(
        "INSERT INTO harvest_batch_items (workflow_name, input, start_source, start_source_ref) "
        "VALUES ($1, $2::jsonb, $3, $4)",
        {def->name, req.input.dump(), source, req.source_ref});
    if (!b) return fail(b.error());
    return finish({StartOutcomeKind::kDeferred, std::nullopt});
  }

  if (def->options.throttle) {
    const auto& policy = *def->options.throttle;
    if (req.workflow_id) {
      auto found = conn.exec(
          "SELECT id FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = "
          "$2",
          {def->name, req.workflow_id});
      if (!found) return fail(found.error());
      if (!found->empty()) {
        return finish({StartOutcomeKind::kIdempotentReplay, found->get(0, "id")});
      }
    }
    if (auto r = conn.exec("INSERT INTO harvest_admission_throttle VALUES ($1, now(), 0) "
                           "ON CONFLICT (workflow_name) DO NOTHING",
                           {def->name});
        !r) {
      return fail(r.error());
    }
    auto window = refresh_throttle_window(conn, def->name, policy);
    if (!window) return fail(window.error());
    const bool queued = window->get_bool(0, "queued");
    if (!queued && window->get_int(0, "used") < policy.starts) {
      auto id = insert_execution(conn, *def, req.workflow_id, req.input, source, req.source_ref);
      if (!id) return fail(id.error());
      if (!*id) {
        auto existing = existing_execution(conn, def->name, *req.workflow_id);
        if (!existing) return fail(existing.error());
        return finish({StartOutcomeKind::kIdempotentReplay, *existing});
      }
      if (auto r = conn.exec(
              "UPDATE harvest_admission_throttle SET used = used + 1 WHERE workflow_name = $1",
              {def->name});
          !r) {
        return fail(r.error());
      }
      return finish({StartOutcomeKind::kStarted, **id});
    }
    // Over the rate (or behind earlier deferred starts): queue it. A second
    // deferral of the same workflow_id collapses into the queued one.
    auto d = conn.exec(
        "INSERT INTO harvest_deferred_starts "
        "(workflow_name, workflow_id, input, start_source, start_source_ref) "
        "VALUES ($1, $2, $3::jsonb, $4, $5) ON CONFLICT (workflow_name, workflow_id) DO NOTHING",
        {def->name, req.workflow_id, req.input.dump(), source, req.source_ref});
    if (!d) return fail(d.error());
    return finish({StartOutcomeKind::kDeferred, std::nullopt});
  }

  // Keyed: claim the key for the execution about to be created; an expired
  // claim is taken over as if it never existed.
  std::string claimed_for = new_uuid();
  {
    auto claim = conn.exec(
        "INSERT INTO harvest_start_idempotency "
        "(workflow_name, idempotency_key, execution_id, expires_at) "
        "VALUES ($1, $2, $3, now() + $4 * interval '1 second') "
        "ON CONFLICT (workflow_name, idempotency_key) DO UPDATE SET "
        "execution_id = EXCLUDED.execution_id, expires_at = EXCLUDED.expires_at, created_at = "
        "now() "
        "WHERE harvest_start_idempotency.expires_at <= now() RETURNING execution_id",
        {def->name, req.idempotency_key, claimed_for,
         seconds_param(config_.start_idempotency_window)});
    if (!claim) return fail(claim.error());
    if (claim->empty()) {
      auto owner = conn.exec(
          "SELECT execution_id FROM harvest_start_idempotency "
          "WHERE workflow_name = $1 AND idempotency_key = $2",
          {def->name, req.idempotency_key});
      if (!owner) return fail(owner.error());
      if (owner->empty()) {
        return fail(Error::transient_error("idempotency claim vanished during start; retry"));
      }
      return finish({StartOutcomeKind::kIdempotentReplay, owner->get(0, "execution_id")});
    }
  }
  auto id =
      insert_execution(conn, *def, req.workflow_id, req.input, source, req.source_ref, claimed_for);
  if (!id) return fail(id.error());
  if (*id) return finish({StartOutcomeKind::kStarted, **id});
  // The workflow_id names an existing run: the key now points at it.
  auto existing = existing_execution(conn, def->name, *req.workflow_id);
  if (!existing) return fail(existing.error());
  auto point = conn.exec(
      "UPDATE harvest_start_idempotency SET execution_id = $3 "
      "WHERE workflow_name = $1 AND idempotency_key = $2",
      {def->name, req.idempotency_key, *existing});
  if (!point) return fail(point.error());
  return finish({StartOutcomeKind::kIdempotentReplay, *existing});
}

Result<SignalOutcome> Engine::signal(const SignalRequest& req) {
  if (auto ok = check_caller_key(req.idempotency_key); !ok) return fail(ok.error());
  if (req.name.empty()) return fail(Error::bad_request("signal name must not be empty"));
  // Signals follow their target's shard.
  size_t shard = 0;
  if (req.target.execution_id) {
    auto where = locate(*req.target.execution_id);
    if (!where) return fail(where.error());
    if (!*where) return fail(Error::not_found("no such execution for signal"));
    shard = **where;
  } else if (req.target.workflow && req.target.workflow_id) {
    shard = route(*req.target.workflow, req.target.workflow_id, std::nullopt);
  }
  auto conn = pool(shard).acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  Result<store::PgResult> target = [&]() -> Result<store::PgResult> {
    if (req.target.execution_id) {
      return (*conn)->exec(
          "SELECT id, status FROM harvest_workflow_executions WHERE id = $1::uuid "
          "FOR NO KEY UPDATE",
          {req.target.execution_id});
    }
    if (req.target.workflow && req.target.workflow_id) {
      return (*conn)->exec(
          "SELECT id, status FROM harvest_workflow_executions "
          "WHERE workflow_name = $1 AND workflow_id = $2 FOR NO KEY UPDATE",
          {req.target.workflow, req.target.workflow_id});
    }
    return fail(Error::bad_request(
        "signal target needs an execution id, or a workflow name and workflow_id"));
  }();
  if (!target) return fail(target.error());
  if (target->empty()) return fail(Error::not_found("no such execution for signal"));
  std::string id = target->get(0, "id");
  std::string status = target->get(0, "status");
  if (status == "completed" || status == "failed") {
    return fail(
        Error::conflict(fmt::format("execution {} is {}; it accepts no more signals", id, status)));
  }
  auto ins = (*conn)->exec(
      "INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key) "
      "VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (execution_id, idempotency_key) DO NOTHING "
      "RETURNING id",
      {id, req.name, req.payload.dump(), req.idempotency_key});
  if (!ins) return fail(ins.error());
  if (ins->empty()) {
    if (auto c = tx->commit(); !c) return fail(c.error());
    return SignalOutcome{SignalOutcomeKind::kDuplicate, id};
  }
  auto wake = (*conn)->exec(
      "UPDATE harvest_workflow_executions SET signal_seq = signal_seq + 1, "
      "run_after = CASE WHEN status = 'waiting' THEN now() ELSE run_after END WHERE id = $1",
      {id});
  if (!wake) return fail(wake.error());
  if (auto c = tx->commit(); !c) return fail(c.error());
  return SignalOutcome{SignalOutcomeKind::kDelivered, id};
}

Result<SignalWithStartOutcome> Engine::signal_with_start(const SignalWithStartRequest& req) {
  if (auto ok = check_caller_key(req.idempotency_key); !ok) return fail(ok.error());
  return signal_with_start_checked(req);
}

Result<SignalWithStartOutcome> Engine::signal_with_start_derived(SignalWithStartRequest request,
                                                                 const DerivedKeyPass& key) {
  request.idempotency_key = key.key();
  return signal_with_start_checked(request);
}

Result<SignalWithStartOutcome> Engine::signal_with_start_checked(
    const SignalWithStartRequest& req) {
  const WorkflowDef* def = workflows_.find(req.workflow);
  if (!def) return fail(Error::not_found(fmt::format("unknown workflow '{}'", req.workflow)));
  if (req.workflow_id.empty()) {
    return fail(Error::bad_request("signal-with-start needs a workflow_id"));
  }
  if (req.signal.empty()) return fail(Error::bad_request("signal name must not be empty"));
  // The start input matters only when this call creates the run.
  const auto bad_input = def->validate_input(req.start_input);
  auto conn = pool(route(req.workflow, req.workflow_id, std::nullopt)).acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  SignalWithStartOutcome out;
  // Creating the row (or waiting on a concurrent creator's unique-index entry,
  // then locking the row) serialises every signal writer of this execution, so
  // signal ids are assigned in commit order.
  std::string status = "pending";
  Result<std::optional<std::string>> created = std::optional<std::string>{};
  if (!bad_input) {
    created = insert_execution(**conn, *def, req.workflow_id, req.start_input,
                               to_string(req.source), req.source_ref);
    if (!created) return fail(created.error());
  }
  if (*created) {
    out.execution_id = **created;
    out.started = true;
  } else {
    auto row = (*conn)->exec(
        "SELECT id, status FROM harvest_workflow_executions WHERE workflow_name = $1 AND "
        "workflow_id = $2 FOR NO KEY UPDATE",
        {def->name, req.workflow_id});
    if (!row) return fail(row.error());
    if (row->empty()) {
      if (bad_input) {
        return fail(Error::invalid_input(
            fmt::format("start input does not match workflow '{}': {}", req.workflow, *bad_input)));
      }
      return fail(Error::transient_error("execution vanished; retry"));
    }
    out.execution_id = row->get(0, "id");
    status = row->get(0, "status");
  }
  auto ins = (*conn)->exec(
      "INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key) "
      "VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (execution_id, idempotency_key) DO NOTHING "
      "RETURNING id",
      {out.execution_id, req.signal, req.payload.dump(), req.idempotency_key});
  if (!ins) return fail(ins.error());
  out.duplicate_signal = ins->empty();
  if (!out.duplicate_signal && (status == "completed" || status == "failed")) {
    // Nobody would ever read it: refuse (the transaction rolls back) so the
    // caller sees it — a connector dead-letters the message.
    return fail(
        Error::conflict(fmt::format("execution {} of '{}' ({}) is {} and accepts no more signals",
                                    out.execution_id, req.workflow, req.workflow_id, status)));
  }
  if (!out.duplicate_signal) {
    auto wake = (*conn)->exec(
        "UPDATE harvest_workflow_executions SET signal_seq = signal_seq + 1, "
        "run_after = CASE WHEN status = 'waiting' THEN now() ELSE run_after END WHERE id = $1",
        {out.execution_id});
    if (!wake) return fail(wake.error());
  }
  if (auto c = tx->commit(); !c) return fail(c.error());
  if (out.started) {
    config_.metrics->increment(metrics::kEngineStarts,
                               {{"workflow", def->name}, {"outcome", "started"}});
  }
  return out;
}

Result<ExecutionView> Engine::get_execution(const std::string& execution_id) {
  auto where = locate(execution_id);
  if (!where) return fail(where.error());
  if (!*where) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  auto conn = pool(**where).acquire();
  if (!conn) return fail(conn.error());
  auto r = (*conn)->exec(
      "SELECT id, workflow_name, workflow_id, status, input::text AS input, output::text AS "
      "output, "
      "error, start_source, start_source_ref, attempt FROM harvest_workflow_executions "
      "WHERE id = $1::uuid",
      {execution_id});
  if (!r) return fail(r.error());
  if (r->empty()) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  ExecutionView v;
  v.id = r->get(0, "id");
  v.workflow_name = r->get(0, "workflow_name");
  v.workflow_id = r->get_opt(0, "workflow_id");
  v.status = r->get(0, "status");
  v.input = Json::parse(r->get(0, "input"));
  if (auto o = r->get_opt(0, "output")) v.output = Json::parse(*o);
  v.error = r->get_opt(0, "error");
  v.start_source = r->get(0, "start_source");
  v.start_source_ref = r->get_opt(0, "start_source_ref");
  v.attempt = static_cast<int>(r->get_int(0, "attempt"));
  auto ev = (*conn)->exec(
      "SELECT id, op_seq, kind, name, payload::text AS payload FROM harvest_workflow_events "
      "WHERE execution_id = $1 ORDER BY id",
      {v.id});
  if (!ev) return fail(ev.error());
  for (int i = 0; i < ev->rows(); ++i) {
    HistoryEvent h;
    h.id = ev->get_int(i, "id");
    if (!ev->is_null(i, "op_seq")) h.op_seq = static_cast<int>(ev->get_int(i, "op_seq"));
    h.kind = ev->get(i, "kind");
    h.name = ev->get_opt(i, "name");
    if (auto p = ev->get_opt(i, "payload")) h.payload = Json::parse(*p);
    v.history.push_back(std::move(h));
  }
  return v;
}

Result<std::optional<std::string>> Engine::find_execution(const std::string& workflow,
                                                          const std::string& workflow_id) {
  auto conn = pool(route(workflow, workflow_id, std::nullopt)).acquire();
  if (!conn) return fail(conn.error());
  auto r = (*conn)->exec(
      "SELECT id FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2",
      {workflow, workflow_id});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{r->get(0, "id")};
}

Result<int> Engine::fire_deferred() {
  int created = 0;
  std::optional<Error> first_error;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    // A shard that is down must not hold back deferred starts on the others.
    auto n = fire_deferred_on(shard);
    if (!n) {
      log::warn("firing deferred starts on shard {} failed: {}", shard, n.error().describe());
      if (!first_error) first_error = n.error();
      continue;
    }
    created += *n;
  }
  if (first_error && created == 0) return fail(*first_error);
  return created;
}

Result<int> Engine::fire_deferred_on(size_t shard) {
  int created = 0;
  for (const auto& name : workflows_.names()) {
    const WorkflowDef* def = workflows_.find(name);
    if (!def->options.throttle) continue;
    const auto& policy = *def->options.throttle;
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto tx = store::Transaction::begin(**conn);
    if (!tx) return fail(tx.error());
    auto window = refresh_throttle_window(**conn, name, policy);
    if (!window) return fail(window.error());
    if (window->empty()) continue;  // never throttled anything yet
    long long available = policy.starts - window->get_int(0, "used");
    if (available <= 0) continue;
    auto popped = (*conn)->exec(
        "DELETE FROM harvest_deferred_starts WHERE id IN (SELECT id FROM harvest_deferred_starts "
        "WHERE workflow_name = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) "
        "RETURNING id, workflow_id, input::text AS input, start_source, start_source_ref",
        {name, std::to_string(available)});
    if (!popped) return fail(popped.error());
    std::vector<int> order(popped->rows());
    for (int i = 0; i < popped->rows(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return popped->get_int(a, "id") < popped->get_int(b, "id"); });
    for (int i : order) {
      auto id = insert_execution(
          **conn, *def, popped->get_opt(i, "workflow_id"), Json::parse(popped->get(i, "input")),
          popped->get(i, "start_source"), popped->get_opt(i, "start_source_ref"));
      if (!id) return fail(id.error());
      if (*id) ++created;
    }
    if (popped->rows() > 0) {
      auto used = (*conn)->exec(
          "UPDATE harvest_admission_throttle SET used = used + $2 WHERE workflow_name = $1",
          {name, std::to_string(popped->rows())});
      if (!used) return fail(used.error());
    }
    if (auto c = tx->commit(); !c) return fail(c.error());
  }

  for (const auto& name : workflows_.names()) {
    const WorkflowDef* def = workflows_.find(name);
    if (def->options.debounce) {
      auto conn = pool(shard).acquire();
      if (!conn) return fail(conn.error());
      auto tx = store::Transaction::begin(**conn);
      if (!tx) return fail(tx.error());
      auto due = (*conn)->exec(
          "UPDATE harvest_debounce SET pending = false, fired_runs = fired_runs + 1 "
          "WHERE (workflow_name, workflow_id) IN (SELECT workflow_name, workflow_id FROM "
          "harvest_debounce WHERE workflow_name = $1 AND pending AND fire_at <= now() "
          "FOR UPDATE SKIP LOCKED) RETURNING workflow_id, input::text AS input, start_source, "
          "start_source_ref, fired_runs",
          {name});
      if (!due) return fail(due.error());
      for (int i = 0; i < due->rows(); ++i) {
        auto id = insert_execution(
            **conn, *def,
            fmt::format("{}#{}", due->get(i, "workflow_id"), due->get(i, "fired_runs")),
            Json::parse(due->get(i, "input")), due->get(i, "start_source"),
            due->get_opt(i, "start_source_ref"));
        if (!id) return fail(id.error());
        if (*id) ++created;
      }
      if (auto c = tx->commit(); !c) return fail(c.error());
    }
    if (def->options.batch) {
      const auto& policy = *def->options.batch;
      // Fire full batches, then a partial one whose oldest item waited max_wait.
      while (true) {
        auto conn = pool(shard).acquire();
        if (!conn) return fail(conn.error());
        auto tx = store::Transaction::begin(**conn);
        if (!tx) return fail(tx.error());
        // One firer per batched workflow at a time, so concurrent workers
        // cannot split a batch that was neither full nor due.
        if (auto l = (*conn)->exec("SELECT pg_advisory_xact_lock(hashtext('harvest_batch:' || $1))",
                                   {name});
            !l) {
          return fail(l.error());
        }
        auto ready = (*conn)->exec(
            "SELECT count(*) >= $2 OR min(created_at) <= now() - $3 * interval '1 millisecond' "
            "AS ready FROM (SELECT created_at FROM harvest_batch_items WHERE workflow_name = $1 "
            "ORDER BY id LIMIT $2) b",
            {name, std::to_string(policy.max_size), std::to_string(policy.max_wait.count())});
        if (!ready) return fail(ready.error());
        if (ready->is_null(0, 0) || !ready->get_bool(0, "ready")) break;
        auto items = (*conn)->exec(
            "DELETE FROM harvest_batch_items WHERE id IN (SELECT id FROM harvest_batch_items "
            "WHERE workflow_name = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) "
            "RETURNING id, input::text AS input, start_source, start_source_ref",
            {name, std::to_string(policy.max_size)});
        if (!items) return fail(items.error());
        if (items->empty()) break;
        std::vector<int> order(items->rows());
        for (int i = 0; i < items->rows(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](int a, int b) { return items->get_int(a, "id") < items->get_int(b, "id"); });
        Json batch = Json::array();
        for (int i : order) batch.push_back(Json::parse(items->get(i, "input")));
        auto id = insert_execution(**conn, *def, std::nullopt, batch,
                                   items->get(order[0], "start_source"),
                                   items->get_opt(order[0], "start_source_ref"));
        if (!id) return fail(id.error());
        if (auto c = tx->commit(); !c) return fail(c.error());
        ++created;
      }
    }
  }
  return created;
}

Result<long long> Engine::queue_depth() {
  long long depth = 0;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto r = (*conn)->exec(
        "SELECT count(*) FROM harvest_workflow_executions WHERE status IN ('pending', 'waiting') "
        "AND run_after <= now()");
    if (!r) return fail(r.error());
    depth += std::stoll(r->get(0, 0));
  }
  config_.metrics->set_gauge(metrics::kEngineQueueDepth, {}, static_cast<double>(depth));
  return depth;
}

Result<ExecutionPage> Engine::list_executions(const ExecutionFilter& filter) {
  size_t limit = std::clamp<size_t>(filter.limit, 1, 500);
  // Cursor: "<created_at micros>|<id>" of the last item of the previous page.
  std::optional<std::string> cursor_ts, cursor_id;
  if (filter.cursor) {
    auto bar = filter.cursor->find('|');
    if (bar == std::string::npos) return fail(Error::bad_request("malformed cursor"));
    cursor_ts = filter.cursor->substr(0, bar);
    cursor_id = filter.cursor->substr(bar + 1);
  }
  std::vector<std::pair<long long, ExecutionSummary>> all;  // (created micros, row)
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto r = (*conn)->exec(
        "SELECT id, workflow_name, workflow_id, status, start_source, start_source_ref, attempt, "
        "(extract(epoch FROM created_at) * 1000000)::bigint AS created_us, "
        "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS created, "
        "to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS "
        "completed "
        "FROM harvest_workflow_executions WHERE ($1::text IS NULL OR workflow_name = $1) "
        "AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR start_source = $3) "
        "AND ($4::bigint IS NULL OR ((extract(epoch FROM created_at) * 1000000)::bigint, id::text) "
        "< ($4::bigint, $5::text)) "
        "ORDER BY created_at DESC, id DESC LIMIT $6",
        {filter.workflow, filter.status, filter.start_source, cursor_ts, cursor_id,
         std::to_string(limit + 1)});
    if (!r) return fail(r.error());
    for (int i = 0; i < r->rows(); ++i) {
      ExecutionSummary e;
      e.id = r->get(i, "id");
      e.workflow_name = r->get(i, "workflow_name");
      e.workflow_id = r->get_opt(i, "workflow_id");
      e.status = r->get(i, "status");
      e.start_source = r->get(i, "start_source");
      e.start_source_ref = r->get_opt(i, "start_source_ref");
      e.attempt = static_cast<int>(r->get_int(i, "attempt"));
      e.created_at = r->get(i, "created");
      e.completed_at = r->get_opt(i, "completed");
      e.shard = static_cast<int>(shard);
      all.emplace_back(r->get_int(i, "created_us"), std::move(e));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.id > b.second.id;
  });
  ExecutionPage page;
  for (size_t i = 0; i < all.size() && i < limit; ++i) page.items.push_back(all[i].second);
  if (all.size() > limit) {
    const auto& last = all[limit - 1];
    page.next_cursor = fmt::format("{}|{}", last.first, last.second.id);
  }
  return page;
}

Result<std::vector<EngineDeadLetter>> Engine::list_dead_letters(size_t limit) {
  std::vector<EngineDeadLetter> out;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto r = (*conn)->exec(
        "SELECT execution_id, workflow_name, workflow_id, error, attempts, "
        "to_char(failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS failed "
        "FROM harvest_engine_dead_letters WHERE replayed_at IS NULL "
        "ORDER BY failed_at DESC LIMIT $1",
        {std::to_string(std::clamp<size_t>(limit, 1, 1000))});
    if (!r) return fail(r.error());
    for (int i = 0; i < r->rows(); ++i) {
      out.push_back(EngineDeadLetter{r->get(i, "execution_id"), r->get(i, "workflow_name"),
                                     r->get_opt(i, "workflow_id"), r->get(i, "error"),
                                     static_cast<int>(r->get_int(i, "attempts")),
                                     r->get(i, "failed"), static_cast<int>(shard)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.failed_at > b.failed_at; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

Status Engine::replay_dead_letter(const std::string& execution_id) {
  auto where = locate(execution_id);
  if (!where) return fail(where.error());
  if (!*where) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  auto conn = pool(**where).acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  auto marked = (*conn)->exec(
      "UPDATE harvest_engine_dead_letters SET replayed_at = now() "
      "WHERE execution_id = $1::uuid AND replayed_at IS NULL RETURNING execution_id",
      {execution_id});
  if (!marked) return fail(marked.error());
  if (marked->empty()) {
    return fail(Error::not_found(fmt::format(
        "execution {} is not in the dead letters (or was already replayed)", execution_id)));
  }
  // Recorded steps stay: the replayed run resumes after the last one.
  auto reset = (*conn)->exec(
      "WITH r AS (UPDATE harvest_workflow_executions SET status = 'pending', attempt = 1, "
      "error = NULL, output = NULL, completed_at = NULL, run_after = now(), updated_at = now() "
      "WHERE id = $1::uuid AND status = 'failed' RETURNING id) "
      "INSERT INTO harvest_workflow_events (execution_id, kind) SELECT id, 'Replayed' FROM r "
      "RETURNING execution_id",
      {execution_id});
  if (!reset) return fail(reset.error());
  if (reset->empty()) {
    return fail(Error::conflict(fmt::format("execution {} is no longer failed", execution_id)));
  }
  if (auto c = tx->commit(); !c) return fail(c.error());
  return {};
}

std::vector<ShardStatus> Engine::shard_status() {
  std::vector<ShardStatus> out;
  for (size_t i = 0; i < shards_.size(); ++i) {
    ShardStatus st;
    st.index = static_cast<int>(i);
    // host:port/db without user or password.
    std::string url = shards_[i].url;
    auto at = url.find('@');
    auto scheme = url.find("://");
    st.location = at != std::string::npos       ? url.substr(at + 1)
                  : scheme != std::string::npos ? url.substr(scheme + 3)
                                                : url;
    auto conn = shards_[i].pool->acquire();
    if (!conn) {
      st.error = conn.error().message;
    } else if (auto r = (*conn)->exec("SELECT 1"); !r) {
      st.error = r.error().message;
    } else {
      st.readable = true;
    }
    out.push_back(std::move(st));
  }
  return out;
}

int Engine::readable_shards() {
  int n = 0;
  for (const auto& s : shard_status()) n += s.readable;
  return n;
}

Result<int> Engine::purge() {
  int deleted = 0;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) {
      // Retention on the reachable shards goes on; this one is purged next time.
      log::warn("retention purge skipped shard {}: {}", shard, conn.error().describe());
      continue;
    }
    const auto& retention = config_.retention;
    std::string overridden = "{";
    bool first = true;
    for (const auto& [workflow, age] : retention.per_workflow) {
      auto r = (*conn)->exec(
          "DELETE FROM harvest_workflow_executions WHERE workflow_name = $1 "
          "AND status IN ('completed', 'failed') AND completed_at < now() - $2 * interval '1 "
          "second'",
          {workflow, seconds_param(age)});
      if (!r) return fail(r.error());
      deleted += static_cast<int>(r->affected());
      overridden += (first ? "" : ",") + Json(workflow).dump();
      first = false;
    }
    overridden += "}";
    if (retention.max_age) {
      auto r = (*conn)->exec(
          "DELETE FROM harvest_workflow_executions WHERE workflow_name <> ALL($1::text[]) "
          "AND status IN ('completed', 'failed') AND completed_at < now() - $2 * interval '1 "
          "second'",
          {overridden, seconds_param(*retention.max_age)});
      if (!r) return fail(r.error());
      deleted += static_cast<int>(r->affected());
    }
    auto claims = (*conn)->exec("DELETE FROM harvest_start_idempotency WHERE expires_at <= now()");
    if (!claims) return fail(claims.error());
    if (deleted > 0 || claims->affected() > 0) {
      log::info("retention purged {} terminal executions and {} expired start claims", deleted,
                claims->affected());
    }
  }
  return deleted;
}

WorkflowRegistry& WorkflowRegistry::add_def(WorkflowDef def) {
  if (def.name.empty()) throw ConfigError("a workflow needs a non-empty name");
  if (defs_.contains(def.name)) {
    throw ConfigError(fmt::format("workflow '{}' is registered twice", def.name));
  }
  if (!def.validate_input) def.validate_input = [](const Json&) { return std::nullopt; };
  std::string name = def.name;
  defs_.emplace(std::move(name), std::move(def));
  return *this;
}

const WorkflowDef* WorkflowRegistry::find(std::string_view name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<std::string> WorkflowRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : defs_) out.push_back(k);
  return out;
}

}  // namespace harvest::engine
