#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include <harvest/common/log.hpp>
#include <harvest/connector/binding_rules.hpp>
#include <harvest/connector/cluster_identity.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::plugin {

using connector::BindingKind;
using connector::IdempotencyMode;

#if HARVEST_WITH_API
namespace {

api::BindingOverview overview_of(const connector::BindingStatus& s) {
  api::BindingOverview o{.binding = s.binding,
                         .kind = s.kind,
                         .stream = s.stream,
                         .workflow = s.workflow,
                         .subscription = s.subscription,
                         .running = s.running,
                         .lag = s.lag,
                         .in_flight = s.in_flight,
                         .last_pass_at = std::nullopt,
                         .stalls = s.stalls,
                         .rebuilds = s.rebuilds,
                         .store_available = s.store_available,
                         .dispatched = s.dispatched,
                         .dead_lettered = s.dead_lettered,
                         .retried = s.retried,
                         .collisions = s.collisions,
                         .collision_hold = s.collision_hold};
  if (s.last_pass) {
    o.last_pass_at =
        fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                    std::chrono::time_point_cast<std::chrono::milliseconds>(*s.last_pass));
  }
  return o;
}

}  // namespace
#endif

ValidationReport validate_connectors(const std::vector<ConnectorSpec>& specs,
                                     const ValidationContext& ctx) {
  ValidationReport report;
  auto refuse = [&](std::string m) { report.refusals.push_back(std::move(m)); };
  auto warn = [&](std::string m) { report.warnings.push_back(std::move(m)); };
  const engine::WorkflowRegistry& registry = *ctx.workflows;

  std::map<std::string, int> names;
  std::map<std::string, std::string> by_subscription;  // identity -> binding
  for (const auto& spec : specs) {
    const auto& b = spec.binding;
    if (++names[b.name()] == 2) {
      refuse(
          fmt::format("two connectors are named '{}': binding names must be unique (they "
                      "namespace the dedupe keys and label the metrics)",
                      b.name()));
    }
    for (auto& r : connector::binding_refusals(b, registry, spec.source.get())) {
      refuse(std::move(r));
    }
    if (!spec.source) continue;
    std::string identity = spec.source->subscription_identity();
    if (auto [it, fresh] = by_subscription.try_emplace(identity, b.name()); !fresh) {
      refuse(fmt::format(
          "bindings '{}' and '{}' consume the same subscription ({}): they would split one "
          "stream between them. Give each its own consumer group (Kafka) or queue (SQS)",
          it->second, b.name(), identity));
    }
  }

  // Fan-in: one (stream, target) pair fed from different subscriptions.
  std::map<std::pair<std::string, std::string>, std::vector<const ConnectorSpec*>> pairs;
  for (const auto& spec : specs) {
    if (spec.source) pairs[{spec.binding.stream(), spec.binding.workflow()}].push_back(&spec);
  }
  for (const auto& [pair, group] : pairs) {
    std::set<std::string> subs;
    std::vector<std::string> bindings;
    for (const auto* s : group) {
      subs.insert(s->source->subscription_identity());
      bindings.push_back("'" + s->binding.name() + "'");
    }
    if (subs.size() > 1) {
      warn(fmt::format(
          "bindings {} feed stream '{}' into workflow '{}' from different subscriptions "
          "(fan-in). Against a single broker every message is dispatched once per binding; if "
          "the fan-in is deliberate, ignore this warning",
          fmt::join(bindings, " and "), pair.first, pair.second));
    }
  }

  // Bindings whose poison goes to the Postgres sink (the connector table).
  std::vector<std::string> table_bindings;
  for (const auto& spec : specs) {
    const auto& b = spec.binding;
    if (!b.uses_broker_native_dead_letter()) table_bindings.push_back("'" + b.name() + "'");
    if (!registry.find(b.workflow()) ||
        connector::resolve_idempotency_mode(b, registry) != IdempotencyMode::kBrokerCoordinates) {
      continue;
    }
    if (b.kind() == BindingKind::kStarts && !ctx.start_window_explicit) {
      warn(fmt::format(
          "binding '{}' dedupes on broker coordinates for the start idempotency window, left at "
          "its 24 h default: a broker replay older than that starts a second execution. Set "
          "start_idempotency_window(...) to at least your broker's replay horizon",
          b.name()));
    }
    if (b.kind() == BindingKind::kSignalsWithStart) {
      if (auto age = ctx.retention.effective_max_age(b.workflow())) {
        warn(fmt::format(
            "binding '{}' dedupes on broker coordinates stored with the runs of workflow '{}', "
            "which retention deletes after {} s: a broker replay older than that delivers its "
            "signal again. Size retention to your broker's replay horizon",
            b.name(), b.workflow(), age->count()));
      }
    }
    if (ctx.readable_shards > 1) {
      warn(fmt::format(
          "binding '{}' dedupes on broker coordinates, which is shard-local, and {} shards are "
          "readable: keep its mapping function's workflow_id a deterministic function of the "
          "message",
          b.name(), ctx.readable_shards));
    }
  }
  // Broker-native bindings never write the table: no warning on their behalf.
  if (!table_bindings.empty()) {
    for (const auto& label : ctx.pending_connector_migrations) {
      warn(fmt::format(
          "connector bindings {} need migration {}, which is pending: run `harvest migrate` "
          "before enabling them, or the first poison message's dead-letter write fails and it "
          "is retried forever",
          fmt::join(table_bindings, ", "), label));
    }
  }
  return report;
}

HarvestPlugin& HarvestPlugin::workflows(engine::WorkflowRegistry registry) {
  workflows_ = std::move(registry);
  return *this;
}
HarvestPlugin& HarvestPlugin::engine_config(engine::EngineConfig config) {
  bool explicit_window = window_explicit_;
  auto window = engine_config_.start_idempotency_window;
  auto retention = engine_config_.retention;
  auto metrics = engine_config_.metrics;
  engine_config_ = std::move(config);
  if (explicit_window) {
    engine_config_.start_idempotency_window = window;
  } else if (engine_config_.start_idempotency_window !=
             engine::EngineConfig{}.start_idempotency_window) {
    // A window set through the engine config is as deliberate as one set
    // with start_idempotency_window(): no "left at its default" warning.
    window_explicit_ = true;
  }
  if (!engine_config_.metrics) engine_config_.metrics = metrics;
  if (engine_config_.retention.per_workflow.empty() && !engine_config_.retention.max_age) {
    engine_config_.retention = retention;
  }
  return *this;
}
HarvestPlugin& HarvestPlugin::connector(connector::SourceBinding binding,
                                        std::shared_ptr<connector::EventSource> source) {
  return connector_with_config(std::move(binding), std::move(source), {});
}
HarvestPlugin& HarvestPlugin::connector_with_config(connector::SourceBinding binding,
                                                    std::shared_ptr<connector::EventSource> source,
                                                    connector::ConnectorRuntimeConfig config) {
  connectors_.push_back({std::move(binding), std::move(source), config});
  return *this;
}
HarvestPlugin& HarvestPlugin::worker(engine::WorkerConfig config) {
  worker_ = std::move(config);
  return *this;
}
HarvestPlugin& HarvestPlugin::start_idempotency_window(std::chrono::seconds window) {
  engine_config_.start_idempotency_window = window;
  window_explicit_ = true;
  return *this;
}
HarvestPlugin& HarvestPlugin::retention(engine::RetentionConfig retention) {
  engine_config_.retention = std::move(retention);
  return *this;
}
HarvestPlugin& HarvestPlugin::metrics(std::shared_ptr<metrics::MetricsRecorder> recorder) {
  engine_config_.metrics = std::move(recorder);
  return *this;
}

#if HARVEST_WITH_API
HarvestPlugin& HarvestPlugin::api(std::string prefix, api::ApiConfig config) {
  config.prefix = std::move(prefix);
  api_ = std::move(config);
  return *this;
}
#endif

std::unique_ptr<HarvestApp> HarvestPlugin::build() {
  // Refusals that need no database come first: fail fast, before connecting.
  ValidationContext ctx{&workflows_, window_explicit_, engine_config_.retention, 1, {}};
  auto early = validate_connectors(connectors_, ctx);
  if (!early.refusals.empty()) {
    for (const auto& r : early.refusals) log::error("{}", r);
    throw ConfigError(fmt::format("harvest cannot start: {}", fmt::join(early.refusals, "; ")));
  }

  std::unique_ptr<HarvestApp> app(new HarvestApp());
  // The connector's tables are needed only by bindings that write them (the
  // dead letters; the cluster a binding reads, for sources that report one):
  // with broker-native dead letters alone they are neither applied nor
  // required.
  const bool needs_table = std::ranges::any_of(connectors_, [](const ConnectorSpec& c) {
    return !c.binding.uses_broker_native_dead_letter() || (c.source && c.source->cluster_id());
  });
  std::vector<store::MigrationSet> plugin_sets;
  if (needs_table) plugin_sets.push_back(connector::connector_migrations());
  auto engine = engine::Engine::open(engine_config_, std::move(workflows_), std::move(plugin_sets));
  if (!engine) {
    const Error& e = engine.error();
    // At start-up an unreachable database is not something to retry: a
    // wrong host, CA, certificate or password stays wrong. Say what the
    // driver said (it names the server, never the password).
    if (is_unavailable(e) && !e.detail.empty()) {
      throw ConfigError(
          "harvest cannot start: the database refused or did not answer the connection (check "
          "the URL's host, TLS settings and credentials): " +
          e.detail);
    }
    throw ConfigError("harvest cannot start: " + e.describe());
  }
  app->engine_ = std::move(*engine);
  engine::Engine& e = *app->engine_;

  ctx.workflows = &e.workflows();
  ctx.readable_shards = e.readable_shards();
  for (const auto& p : e.pending_migrations_at_open()) {
    if (p.set_name == "connector") ctx.pending_connector_migrations.push_back(p.label());
  }
  auto report = validate_connectors(connectors_, ctx);
  for (const auto& w : report.warnings) log::warn("{}", w);
  app->warnings_ = report.warnings;

  if (needs_table) {
    app->sink_ = std::make_shared<connector::PostgresDeadLetterSink>(e.pool());
    app->replays_ = std::make_shared<connector_dlq::DeadLetterStore>(e.pool());
  }
  for (auto& spec : connectors_) {
    // A binding whose source reads another cluster than it did before (in
    // the same key incarnation) would take new records for redeliveries.
    if (spec.source) {
      if (auto same = connector::check_cluster_identity(e.pool(), spec.binding, *spec.source);
          !same) {
        log::error("{}", same.error().message);
        throw ConfigError("harvest cannot start: " + same.error().message);
      }
    }
    auto binding = std::make_shared<const connector::SourceBinding>(spec.binding);
    auto rt = std::make_unique<connector::ConnectorRuntime>(
        binding, spec.source, e, e.config().metrics, IdempotencyMode::kAuto, spec.config);
    if (!binding->uses_broker_native_dead_letter()) {
      rt->with_dead_letter_sink(app->sink_);
      // Operators mark rows for replay; the binding's own runtime replays them.
      rt->with_replay_store(app->replays_);
    }
    app->runtimes_.push_back(std::move(rt));
  }
  app->worker_config_ = worker_;
#if HARVEST_WITH_API
  app->api_config_ = api_;
#endif
  return app;
}

HarvestApp::~HarvestApp() {
  stop();
}

void HarvestApp::start() {
  if (worker_config_ && !worker_) {
    worker_ = std::make_unique<engine::Worker>(*engine_, *worker_config_);
    worker_->start();
  }
  if (consumers_.empty()) {
    for (auto& rt : runtimes_) {
      consumers_.emplace_back([r = rt.get()](std::stop_token st) {
        if (auto s = r->run(st); !s) {
          log::error("connector binding '{}' stopped: {}", r->binding().name(),
                     s.error().describe());
        }
      });
    }
  }
#if HARVEST_WITH_API
  if (api_config_ && !api_server_) {
    // The console's binding overview reads the runtimes this app owns; the
    // server stops (stop(), first) before they go.
    if (!api_config_->bindings) {
      api_config_->bindings = [this] {
        std::vector<api::BindingOverview> out;
        for (const auto& rt : runtimes_) out.push_back(overview_of(rt->status()));
        return out;
      };
    }
    auto server = std::make_unique<api::HttpServer>(*engine_, *api_config_);
    if (auto ok = server->start(); !ok) {
      throw ConfigError("harvest cannot serve its HTTP API: " + ok.error().message);
    }
    api_server_ = std::move(server);
  }
#endif
}

void HarvestApp::stop() {
#if HARVEST_WITH_API
  if (api_server_) api_server_->stop();
  api_server_.reset();
#endif
  for (auto& c : consumers_) c.request_stop();
  consumers_.clear();
  if (worker_) worker_->stop();
  worker_.reset();
}

connector::ConnectorRuntime& HarvestApp::runtime(const std::string& binding) {
  for (auto& rt : runtimes_) {
    if (rt->binding().name() == binding) return *rt;
  }
  throw std::out_of_range("no connector binding named " + binding);
}

}  // namespace harvest::plugin
