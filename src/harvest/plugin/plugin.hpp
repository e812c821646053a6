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

#include <harvest/connector/runtime.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#if HARVEST_WITH_API
#include <harvest/api/http_server.hpp>
#endif

namespace harvest::plugin {

/// One connector as registered with HarvestPlugin: what validate_connectors
/// checks and build() turns into a ConnectorRuntime.
struct ConnectorSpec {
  connector::SourceBinding binding;                ///< what to consume and how to map it
  std::shared_ptr<connector::EventSource> source;  ///< the broker client; null is refused
  connector::ConnectorRuntimeConfig config;        ///< the runtime's polling and back-off knobs
};

/// What the binding checks need to know besides the bindings themselves.
struct ValidationContext {
  /// The registered workflows bindings must target. Required: must not be null.
  const engine::WorkflowRegistry* workflows = nullptr;
  /// The start idempotency window was set by the application; false warns
  /// about coordinate-deduped `starts` bindings left at the 24 h default.
  bool start_window_explicit = false;
  /// Retention in force: coordinate-deduped signals-with-start bindings warn
  /// when their workflow's runs (which hold the dedupe keys) are purged.
  engine::RetentionConfig retention;
  /// Shards answering now; above 1, coordinate-deduped bindings warn that
  /// their dedupe is shard-local.
  int readable_shards = 1;
  std::vector<std::string> pending_connector_migrations;  ///< labels
};

/// The outcome of validate_connectors: messages naming the binding(s) and the fix.
struct ValidationReport {
  std::vector<std::string> refusals;  ///< any one makes build() throw ConfigError
  std::vector<std::string> warnings;  ///< logged by build() and kept in HarvestApp::warnings()
};

/// The build-time checks of CON-4 / CON-17, as a pure function.
[[nodiscard]] ValidationReport validate_connectors(const std::vector<ConnectorSpec>& specs,
                                                   const ValidationContext& context);

class HarvestApp;

/// The builder of a harvest application (see the file comment). Each setter
/// keeps its argument (a later call of the same setter replaces it;
/// `connector` appends) and returns `*this` for chaining. Lifecycle: configure,
/// then `build()` once; build moves the workflows out, so the builder is spent
/// afterwards. Not thread-safe: configure from one thread.
class HarvestPlugin {
 public:
  /// The workflows the engine runs and connectors may target.
  HarvestPlugin& workflows(engine::WorkflowRegistry registry);
  /// Database URLs, profile, pool; see EngineConfig.
  HarvestPlugin& engine_config(engine::EngineConfig config);
  /// Adds a connector with the default ConnectorRuntimeConfig. `source` is
  /// shared with the runtime build() creates; binding names must be unique.
  HarvestPlugin& connector(connector::SourceBinding binding,
                           std::shared_ptr<connector::EventSource> source);
  /// Adds a connector with its own runtime config (poll, batch, back-off).
  HarvestPlugin& connector_with_config(connector::SourceBinding binding,
                                       std::shared_ptr<connector::EventSource> source,
                                       connector::ConnectorRuntimeConfig config);
  /// Runs a worker pool with `config` in this process. Without it this process
  /// only starts and signals runs; workers elsewhere must execute them.
  HarvestPlugin& worker(engine::WorkerConfig config);
  /// How long a start idempotency claim lives (default 24 h). Setting it, to
  /// any value, silences the default-window warning for coordinate dedupe.
  HarvestPlugin& start_idempotency_window(std::chrono::seconds window);
  /// How long terminal runs are kept before purge (default: forever).
  HarvestPlugin& retention(engine::RetentionConfig retention);
  /// The recorder the engine, connectors and API report to (shared; null
  /// means NoopMetrics). A PrometheusMetrics is what the API's /metrics serves.
  HarvestPlugin& metrics(std::shared_ptr<metrics::MetricsRecorder> recorder);
#if HARVEST_WITH_API
  /// Serves the engine's HTTP API under `prefix` (ENG-12), started after the
  /// connectors and stopped before them. `config.prefix` is replaced by
  /// `prefix`; /metrics renders the engine's recorder when it is a
  /// PrometheusMetrics (or `config.metrics`).
  HarvestPlugin& api(std::string prefix = "/api/harvest", api::ApiConfig config = {});
#endif

  /// Validates and wires everything. Throws ConfigError naming the binding(s)
  /// and the fix on any refusal, or when the database cannot be opened.
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

/// The running application that HarvestPlugin::build() returns. It owns the
/// engine, the worker pool, one ConnectorRuntime and consumer thread per
/// binding, and the HTTP API (see the file comment for their order).
/// Lifecycle: `start()`, `stop()`; the destructor stops. Call start and stop
/// from one owning thread; `engine()` and the accessors return references
/// valid for the app's lifetime.
class HarvestApp {
 public:
  ~HarvestApp();
  /// Starts the worker pool, then one consumer thread per connector, then the
  /// HTTP API when configured (throws ConfigError when it cannot listen).
  void start();
  /// Stops the API (finishing requests in progress), the connectors
  /// (finishing their current pass), then the workers.
  void stop();

  /// The engine the app opened; usable before `start()` (e.g. for starts).
  [[nodiscard]] engine::Engine& engine() { return *engine_; }
  /// The runtime of the binding named `binding`. Throws std::out_of_range when
  /// there is none. Its consumer thread runs it while the app is started.
  [[nodiscard]] connector::ConnectorRuntime& runtime(const std::string& binding);
  /// The build-time warnings (each was also logged).
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }
#if HARVEST_WITH_API
  /// The HTTP API, once started; null when not configured.
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
