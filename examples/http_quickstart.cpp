// The HTTP quickstart: one workflow, a worker pool and the HTTP API.
//
//   HARVEST_DATABASE_URL=postgresql://... ./http_quickstart   (or no URL: a
//   private local cluster under .harvest/, dev profile)
//   curl -s -H 'Content-Type: application/json' localhost:8080/api/harvest/workflows/greet/start -d
//   '{"input": {"name": "Ada"}}' curl -s localhost:8080/api/harvest/executions/<execution_id>
//
// Listens on ${HARVEST_HTTP_HOST:-127.0.0.1}:${HARVEST_HTTP_PORT:-8080}; HARVEST_API_TOKEN (or
// HARVEST_API_TOKEN_FILE) makes every route but /healthz and /metrics need
// "Authorization: Bearer <token>". Ctrl-C stops it.
#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include <harvest/api/http_server.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/metrics/prometheus.hpp>

using namespace harvest;

struct Greeting {
  std::string name;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Greeting, name)

int main() {
  // Block the stop signals before any thread starts, so every thread inherits
  // the mask and sigwait below is the only receiver.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::WorkflowRegistry workflows;
  workflows.add("greet", [](engine::WorkflowContext& ctx, Greeting in) {
    return ctx.step("compose", [&] { return fmt::format("Hello, {}!", in.name); });
  });

  auto prometheus = std::make_shared<metrics::PrometheusMetrics>();
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;  // apply migrations at start; no URL: a private cluster
  config.metrics = prometheus;
  auto engine = engine::Engine::open(config, std::move(workflows));
  if (!engine) {
    fmt::print(stderr, "error: {}\n", engine.error().message);
    return 1;
  }

  auto api_config = api::api_config_from_env();
  if (!api_config) {
    fmt::print(stderr, "error: {}\n", api_config.error().message);
    return 2;
  }
  api::ApiConfig api = std::move(*api_config);
  api.metrics = prometheus;

  engine::Worker worker(**engine);
  worker.start();
  api::HttpServer server(**engine, api);
  if (auto ok = server.start(); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error().message);
    return 1;
  }
  fmt::print("serving http://{}:{}{} (workflow 'greet'); Ctrl-C stops\n", api.host, server.port(),
             api.prefix);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  worker.stop();
  return 0;
}
