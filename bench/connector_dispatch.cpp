// The connector's dispatch path on MockSource + PostgreSQL: messages/s for
// max_in_flight 1, 16 and 64, and p50/p99 dispatch latency (map → durable
// start committed), against $HARVEST_DATABASE_URL (migrated here).
//   bench_connector_dispatch [messages-per-case=5000]
#include <fmt/format.h>

#include "support/stats.hpp"
#include <harvest/connector/mock_source.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/plugin/migrations.hpp>

using namespace harvest;
using namespace harvest::connector;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  engine::WorkflowRegistry r;
  r.add("ingest", [](engine::WorkflowContext&, engine::Json in) { return in.size(); });
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;
  config.pool_size = 70;
  auto engine = engine::Engine::open(config, std::move(r), {connector_migrations()});
  if (!engine) {
    fmt::print(stderr, "{}\n", engine.error().message);
    return 1;
  }
  // A ~1 KB JSON body, like a typical order event.
  std::string pad(900, 'x');
  fmt::print("{:<14} {:>8} {:>10} {:>9} {:>9} {:>9}\n", "max_in_flight", "msgs", "msgs/s", "p50 ms",
             "p99 ms", "RSS MiB");
  for (size_t in_flight : {1, 16, 64}) {
    auto metrics = std::make_shared<metrics::RecordingMetrics>();
    std::string name = fmt::format("bench-{}-{}", in_flight, std::time(nullptr));
    auto binding = std::make_shared<SourceBinding>(SourceBinding::starts(name, "events", "ingest"));
    binding->map_json([](const MessageCtx&, engine::Json j) -> MapResult {
      return MappedMessage{j.at("id").get<std::string>(), j};
    });
    binding->max_in_flight(in_flight);
    auto source = std::make_shared<MockSource>("events");
    for (int i = 0; i < n; ++i) {
      source->push_kafka(i % 8, i / 8,
                         engine::Json{{"id", fmt::format("{}-{}", name, i)}, {"pad", pad}}.dump());
    }
    ConnectorRuntime rt(binding, source, **engine, metrics, IdempotencyMode::kAuto,
                        ConnectorRuntimeConfig{.max_batch = 256});
    rt.with_dead_letter_sink(std::make_shared<RecordingDeadLetterSink>());
    auto t0 = std::chrono::steady_clock::now();
    size_t acked = 0;
    while (source->pending() > 0) {
      auto s = rt.run_once();
      if (!s) {
        fmt::print(stderr, "pass failed: {}\n", s.error().message);
        return 1;
      }
      acked += s->acked;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto lat = metrics->observations(metrics::kConnectorDispatchSeconds, {{"source", name}});
    for (auto& v : lat) v *= 1e6;  // µs for percentile_ms
    fmt::print("{:<14} {:>8} {:>10.0f} {:>9.2f} {:>9.2f} {:>9.1f}\n", in_flight, acked,
               acked / secs, bench::percentile_ms(lat, 0.5), bench::percentile_ms(lat, 0.99),
               bench::rss_mib());
  }
  return 0;
}
