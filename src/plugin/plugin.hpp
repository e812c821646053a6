// The composition root: `HarvestPlugin` collects workflows, connectors and
// settings; `build()` validates every binding (CON-4, CON-17), opens the
// engine (applying or warning about migrations, the connector's included)
// and wires each binding to a runtime with the Postgres dead-letter sink.
// `HarvestApp` owns the running parts and their start/stop order: workers
// first, connectors after; on stop, connectors first, then workers.
//
//   auto app = HarvestPlugin()
//       .workflows(std::move(registry))
//       .connector(binding, source)
//       .worker(WorkerConfig{})
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

  // Validates and wires everything. Throws ConfigError naming the binding(s)
  // and the fix on any refusal, or when the database cannot be opened.
  [[nodiscard]] std::unique_ptr<HarvestApp> build();

 private:
  engine::WorkflowRegistry workflows_;
  engine::EngineConfig engine_config_;
  std::vector<ConnectorSpec> connectors_;
  std::optional<engine::WorkerConfig> worker_;
  bool window_explicit_ = false;
};

class HarvestApp {
 public:
  ~HarvestApp();
  // Starts the worker pool, then one consumer thread per connector.
  void start();
  // Stops the connectors (finishing their current pass), then the workers.
  void stop();

  [[nodiscard]] engine::Engine& engine() { return *engine_; }
  [[nodiscard]] connector::ConnectorRuntime& runtime(const std::string& binding);
  // The build-time warnings (each was also logged).
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend class HarvestPlugin;
  HarvestApp() = default;
  std::unique_ptr<engine::Engine> engine_;
  std::optional<engine::WorkerConfig> worker_config_;
  std::unique_ptr<engine::Worker> worker_;
  std::shared_ptr<connector::PostgresDeadLetterSink> sink_;
  std::vector<std::unique_ptr<connector::ConnectorRuntime>> runtimes_;
  std::vector<std::jthread> consumers_;
  std::vector<std::string> warnings_;
};

}  // namespace harvest::plugin
