// The composition root: `HarvestPlugin` collects workflows, connectors and
// settings; `build()` validates every binding (CON-4, CON-17), opens the
// engine (applying or warning about migrations, the connector's included)
// and wires each binding to a runtime with the Postgres dead-letter sink.
// `HarvestApp` owns the running parts and their start/stop order: workers
// first, connectors after, the HTTP API last; on stop the API first (no new
// requests), then connectors, then workers.
//
//   auto app = HarvestPlugin()
//       .workflows(std::move(registry))
//       .connector(binding, source)
//       .worker(WorkerConfig{})
//       .api("/api/harvest", api::ApiConfig{})   // optional (ENG-12)
//       .build();            // throws ConfigError naming the binding and the fix
//   app->start();
#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "connector/runtime.hpp"
#include "engine/engine.hpp"
#include "engine/worker.hpp"
#if HARVEST_WITH_API
#include "api/http_server.hpp"
#endif

namespace harvest::plugin {

struct ConnectorSpec {
  connector::SourceBinding binding;
  std::shared_ptr<connector::EventSource> source;
  connector::ConnectorRuntimeConfig config;
};

// What the binding checks need to know besides the bindings themselves.
struct ValidationContext {
  const engine::WorkflowRegistry* workflows = nullptr;
  bool start_window_explicit = false;
  engine::RetentionConfig retention;
  int readable_shards = 1;
  std::vector<std::string> pending_connector_migrations;  // labels
};

struct ValidationReport {
  std::vector<std::string> refusals;
  std::vector<std::string> warnings;
};

// The build-time checks of CON-4 / CON-17, as a pure function.
[[nodiscard]] ValidationReport validate_connectors(const std::vector<ConnectorSpec>& specs,
                                                   const ValidationContext& context);

class HarvestApp;

class HarvestPlugin {
 public:
  HarvestPlugin& workflows(engine::WorkflowRegistry registry);
  // Database URLs, profile, pool; see EngineConfig.
  HarvestPlugin& engine_config(engine::EngineConfig config);
  HarvestPlugin& connector(connector::SourceBinding binding,
                           std::shared_ptr<connector::EventSource> source);
  HarvestPlugin& connector_with_config(connector::SourceBinding binding,
                                       std::shared_ptr<connector::EventSource> source,
                                       connector::ConnectorRuntimeConfig config);
  HarvestPlugin& worker(engine::WorkerConfig config);
  // How long a start idempotency claim lives (default 24 h). Setting it, to
  // any value, silences the default-window warning for coordinate dedupe.
  HarvestPlugin& start_idempotency_window(std::chrono::seconds window);
  HarvestPlugin& retention(engine::RetentionConfig retention);
  HarvestPlugin& metrics(std::shared_ptr<metrics::MetricsRecorder> recorder);
#if HARVEST_WITH_API
  // Serves the engine's HTTP API under `prefix` (ENG-12), started after the
  // connectors and stopped before them. `config.prefix` is replaced by
  // `prefix`; /metrics renders the engine's recorder when it is a
  // PrometheusMetrics (or `config.metrics`).
  HarvestPlugin& api(std::string prefix = "/api/harvest", api::ApiConfig config = {});
#endif

  // Validates and wires everything. Throws ConfigError naming the binding(s)
  // and the fix on any refusal, or when the database cannot be opened.
  [[nodiscard]] std::unique_ptr<HarvestApp> build();

 private:
  engine::WorkflowRegistry workflows_;
  engine::EngineConfig engine_config_;
  std::vector<ConnectorSpec> connectors_;
  std::optional<engine::WorkerConfig> worker_;
  bool window_explicit_ = false;
#if HARVEST_WITH_API
  std::optional<api::ApiConfig> api_;
#endif
};

class HarvestApp {
 public:
  ~HarvestApp();
  // Starts the worker pool, then one consumer thread per connector, then the
  // HTTP API when configured (throws ConfigError when it cannot listen).
  void start();
  // Stops the API (finishing requests in progress), the connectors
  // (finishing their current pass), then the workers.
  void stop();

  [[nodiscard]] engine::Engine& engine() { return *engine_; }
  [[nodiscard]] connector::ConnectorRuntime& runtime(const std::string& binding);
  // The build-time warnings (each was also logged).
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }
#if HARVEST_WITH_API
  // The HTTP API, once started; null when not configured.
  [[nodiscard]] api::HttpServer* api_server() {
    return api_server_.get();
  }
#endif

 private:
  friend class HarvestPlugin;
  HarvestApp() = default;
  std::unique_ptr<engine::Engine> engine_;
  std::optional<engine::WorkerConfig> worker_config_;
  std::unique_ptr<engine::Worker> worker_;
  std::shared_ptr<connector::PostgresDeadLetterSink> sink_;
  std::shared_ptr<connector_dlq::DeadLetterStore> replays_;
  std::vector<std::unique_ptr<connector::ConnectorRuntime>> runtimes_;
  std::vector<std::jthread> consumers_;
  std::vector<std::string> warnings_;
#if HARVEST_WITH_API
  std::optional<api::ApiConfig> api_config_;
  std::unique_ptr<api::HttpServer> api_server_;
#endif
};

}  // namespace harvest::plugin
