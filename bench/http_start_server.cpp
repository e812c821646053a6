// The HTTP side of the start benchmark: serves the API with a `bench`
// workflow and no worker (so only starts are measured, as in
// bench_engine_start), against $HARVEST_DATABASE_URL, on
// 127.0.0.1:${HARVEST_HTTP_PORT:-8089} with 16 connection threads. Load it with
// bench/http_start.sh (wrk, 16 keep-alive connections). Ctrl-C stops it.
#include <fmt/format.h>

#include <csignal>
#include <cstdlib>

#include <harvest/api/http_server.hpp>
#include <harvest/engine/engine.hpp>

using namespace harvest;

int main() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::WorkflowRegistry workflows;
  workflows.add("bench", [](engine::WorkflowContext&, engine::Json in) { return in; });
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;
  config.pool_size = 20;
  auto engine = engine::Engine::open(config, std::move(workflows));
  if (!engine) {
    fmt::print(stderr, "error: {}\n", engine.error().message);
    return 1;
  }
  api::ApiConfig api;
  const char* port = std::getenv("HARVEST_HTTP_PORT");
  api.port = port ? std::atoi(port) : 8089;
  api.threads = 16;
  api.keep_alive_max_requests = 1'000'000;
  api::HttpServer server(**engine, api);
  if (auto ok = server.start(); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error().message);
    return 1;
  }
  fmt::print("serving on 127.0.0.1:{}\n", server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.stop();
  return 0;
}
