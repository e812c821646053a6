// Engine: opening the harvest database(s), shards and routing, provenance
// names, and the shard probes. The operations live in start.cpp,
// admission.cpp, signal.cpp, reads.cpp and retention.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/common/strings.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/shard.hpp>
#include <harvest/engine/work_signal.hpp>
#include <harvest/store/conninfo.hpp>
#include <harvest/store/dev_cluster.hpp>
#include <harvest/store/pool.hpp>

harvest::store::MigrationSet harvest_migrations_engine();

namespace harvest::engine {

namespace {

std::string env_or(const std::string& value, const char* env) {
  if (!value.empty()) return value;
  const char* v = std::getenv(env);
  return v ? std::string(v) : std::string();
}

struct Resolved {
  std::vector<std::string> urls;
  DeploymentMode mode = DeploymentMode::kEmbedded;
};

// `field` if set, else the environment variable `env` parsed by `parse`,
// else `fallback` when that is unset or empty. The one place HARVEST_PROFILE
// and HARVEST_DATABASE_POOLER are read.
template <typename Mode>
Status resolve_mode(std::optional<Mode>& field, const char* env, Mode fallback,
                    Result<Mode> (*parse)(std::string_view)) {
  if (field) return {};
  const std::string spelled = env_or("", env);
  if (spelled.empty()) {
    field = fallback;
    return {};
  }
  auto mode = parse(spelled);
  if (!mode) return fail(mode.error());
  field = *mode;
  return {};
}

// The harvest database(s): shards, else the split URL, else the embedded
// one, else (dev profile) the private cluster.
Result<Resolved> resolve_databases(EngineConfig& config) {
  if (auto ok = resolve_mode(config.profile, "HARVEST_PROFILE", Profile::kProd, parse_profile);
      !ok) {
    return fail(ok.error());
  }
  config.harvest_database_url = env_or(config.harvest_database_url, "HARVEST_HARVEST_DATABASE_URL");
  config.database_url = env_or(config.database_url, "HARVEST_DATABASE_URL");
  config.instance_id = env_or(config.instance_id, "HARVEST_INSTANCE_ID");
  if (config.shard_urls.empty()) config.shard_urls = split_list(env_or("", "HARVEST_SHARD_URLS"));
  if (auto ok = resolve_mode(config.pooler, "HARVEST_DATABASE_POOLER", Pooler::kNone, parse_pooler);
      !ok) {
    return fail(ok.error());
  }
  if (config.listen_urls.empty())
    config.listen_urls = split_list(env_or("", "HARVEST_LISTEN_URLS"));
  if (!config.shard_urls.empty()) return Resolved{config.shard_urls, DeploymentMode::kSplit};
  if (!config.harvest_database_url.empty()) {
    return Resolved{{config.harvest_database_url}, DeploymentMode::kSplit};
  }
  if (!config.database_url.empty())
    return Resolved{{config.database_url}, DeploymentMode::kEmbedded};
  if (config.profile == Profile::kDev) {
    auto dev_url = store::ensure_dev_cluster();
    if (!dev_url) return fail(dev_url.error());
    return Resolved{{*dev_url}, DeploymentMode::kDevCluster};
  }
  return fail(Error::config(
      "no database configured: set HARVEST_DATABASE_URL (or HARVEST_HARVEST_DATABASE_URL for a "
      "separate harvest database, or HARVEST_SHARD_URLS for several), or HARVEST_PROFILE=dev "
      "for a private local cluster"));
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

std::string_view to_string(Profile profile) {
  switch (profile) {
    case Profile::kDev:
      return "dev";
    case Profile::kTest:
      return "test";
    case Profile::kProd:
      return "prod";
  }
  return "prod";
}

Result<Profile> parse_profile(std::string_view value) {
  for (Profile p : {Profile::kDev, Profile::kTest, Profile::kProd}) {
    if (value == to_string(p)) return p;
  }
  return fail(
      Error::config(fmt::format("profile '{}' (HARVEST_PROFILE) is not one of: dev, test, prod",
                                to_valid_utf8(value.substr(0, 64)))));
}

std::string_view to_string(Pooler pooler) {
  switch (pooler) {
    case Pooler::kNone:
      return "none";
    case Pooler::kTransaction:
      return "transaction";
  }
  return "none";
}

Result<Pooler> parse_pooler(std::string_view value) {
  for (Pooler p : {Pooler::kNone, Pooler::kTransaction}) {
    if (value == to_string(p)) return p;
  }
  return fail(Error::config(
      fmt::format("pooler '{}' (HARVEST_DATABASE_POOLER) is not one of: none, transaction",
                  to_valid_utf8(value.substr(0, 64)))));
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
        to_valid_utf8(key->substr(0, 64)), kReservedKeyPrefix)));
  }
  return {};
}

Engine::Engine(EngineConfig config, WorkflowRegistry workflows, std::vector<std::string> urls,
               DeploymentMode mode)
    : config_(std::move(config)),
      workflows_(std::move(workflows)),
      mode_(mode),
      work_(std::make_unique<WorkSignal>()) {
  if (!config_.metrics) config_.metrics = std::make_shared<metrics::NoopMetrics>();
  for (auto& url : urls) {
    auto pool = std::make_unique<store::Pool>(
        store::PoolConfig{url, config_.pool_size, config_.pool_acquire_timeout,
                          config_.pooler == Pooler::kTransaction});
    shards_.push_back(Shard{std::move(url), std::move(pool)});
  }
}

Engine::~Engine() = default;

store::Pool& Engine::pool(size_t shard) {
  return *shards_.at(shard).pool;
}

WorkSignal& Engine::work_signal() {
  return *work_;
}

Result<std::unique_ptr<Engine>> Engine::open(EngineConfig config, WorkflowRegistry workflows,
                                             std::vector<store::MigrationSet> plugin_migrations) {
  auto resolved = resolve_databases(config);
  if (!resolved) return fail(resolved.error());
  if (config.pooler == Pooler::kTransaction && !config.listen_urls.empty() &&
      config.listen_urls.size() != resolved->urls.size()) {
    return fail(Error::config(fmt::format(
        "{} listen URLs (EngineConfig::listen_urls or HARVEST_LISTEN_URLS) for {} shard(s): give "
        "one direct URL per shard, in shard order, or none to poll",
        config.listen_urls.size(), resolved->urls.size())));
  }
  const bool dev = config.profile == Profile::kDev;
  std::unique_ptr<Engine> engine(new Engine(std::move(config), std::move(workflows),
                                            std::move(resolved->urls), resolved->mode));
  std::vector<store::MigrationSet> sets{engine_migrations()};
  for (auto& s : plugin_migrations) sets.push_back(std::move(s));
  // Every shard carries the full schema (plugin tables included). The first
  // shard must answer; another that does not is reported and skipped, so one
  // shard being down does not keep the rest from serving.
  for (size_t i = 0; i < engine->shards_.size(); ++i) {
    auto conn = engine->shards_[i].pool->acquire();
    if (!conn && i > 0) {
      log::warn("shard {} ({}) is unreachable at start-up ({}); its migrations were not checked", i,
                store::location_of(engine->shards_[i].url), conn.error().describe());
      continue;
    }
    if (!conn) return fail(conn.error());
    if (dev) {
      auto applied = store::apply_migrations(**conn, sets);
      if (!applied) return fail(applied.error());
      continue;
    }
    auto pending = store::pending_migrations(**conn, sets);
    if (!pending) return fail(pending.error());
    for (const auto& p : *pending) {
      log::warn("pending migration {}{}: run `harvest migrate` before serving traffic", p.label(),
                engine->shards_.size() > 1 ? fmt::format(" on shard {}", i) : "");
    }
    // Every shard's pending migrations count (the plugin refuses to serve
    // connectors against a schema that is behind on any shard), each once.
    for (const auto& p : *pending) {
      const bool seen = std::ranges::any_of(engine->pending_at_open_,
                                            [&](const auto& q) { return q.label() == p.label(); });
      if (!seen) engine->pending_at_open_.push_back(p);
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
  // Not a uuid: no such execution (and the lookups stay on the primary key).
  if (!is_uuid(execution_id)) return std::optional<size_t>{};
  for (size_t i = 0; i < shards_.size(); ++i) {
    auto conn = shards_[i].pool->acquire();
    if (!conn) return fail(conn.error());
    auto found = ExecutionStore(**conn).exists(execution_id);
    if (!found) return fail(found.error());
    if (*found) return std::optional<size_t>{i};
  }
  return std::optional<size_t>{};
}

std::vector<store::PendingMigration> Engine::pending_migrations_at_open() const {
  return pending_at_open_;
}

std::string Engine::workflow_label(std::string_view workflow) const {
  return workflows_.find(workflow) ? std::string(workflow) : std::string("unknown");
}

void Engine::record_start(const std::string& workflow, const Result<StartOutcome>& r) {
  std::string outcome =
      r ? std::string(to_string(r->kind)) : (should_retry(r.error()) ? "transient" : "rejected");
  config_.metrics->increment(metrics::kEngineStarts,
                             {{"workflow", workflow_label(workflow)}, {"outcome", outcome}});
}

std::vector<std::string> Engine::listen_urls() const {
  if (config_.pooler != Pooler::kTransaction) return shard_urls();
  return config_.listen_urls;
}

std::vector<std::string> Engine::shard_urls() const {
  std::vector<std::string> out;
  for (const auto& s : shards_) out.push_back(s.url);
  return out;
}

std::vector<ShardStatus> Engine::shard_status() {
  std::vector<ShardStatus> out;
  for (size_t i = 0; i < shards_.size(); ++i) {
    ShardStatus st;
    st.index = static_cast<int>(i);
    st.location = store::location_of(shards_[i].url);
    if (auto probed = probe_shard(i, false); !probed) {
      st.error = probed.error().message;
    } else {
      st.readable = true;
    }
    out.push_back(std::move(st));
  }
  return out;
}

Status Engine::probe_shard(size_t shard, bool writes) {
  store::Pool& pool = *shards_.at(shard).pool;
  auto once = [&]() -> Status {
    auto conn = pool.acquire();
    if (!conn) return fail(conn.error());
    // A session's transaction_read_only is on on a standby and on a primary
    // set read-only (default_transaction_read_only, as a failover in
    // progress fences it): it answers, but a writer must keep waiting.
    auto r = (*conn)->exec(sql::shard::read_only);
    if (!r) return fail(r.error());
    if (writes && r->rows() == 1 && r->get_bool(0, "read_only")) {
      return fail(Error::unavailable(
          "the database accepts no writes now (read-only, or a standby during a failover); retry",
          fmt::format("shard {}: transaction_read_only is on", shard)));
    }
    return {};
  };
  auto probed = once();
  if (!probed && is_unavailable(probed.error())) {
    // Connections that sat idle through an outage are dead as well: drop
    // them and ask once more on a fresh one, so a server that is back is
    // seen as back at the first probe.
    pool.discard_idle();
    probed = once();
  }
  return probed;
}

Status Engine::probe_store() {
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (auto probed = probe_shard(i, true); !probed) return probed;
  }
  return {};
}

int Engine::readable_shards() {
  int n = 0;
  for (const auto& s : shard_status()) n += s.readable;
  return n;
}

}  // namespace harvest::engine
