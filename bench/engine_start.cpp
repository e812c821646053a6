// Engine start throughput: starts/s and latency for 1 and 16 concurrent
// callers, unkeyed and keyed, against $HARVEST_DATABASE_URL (migrated here).
//   bench_engine_start [seconds-per-case=5]
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "support/stats.hpp"
#include <harvest/engine/engine.hpp>

using namespace harvest;
using namespace harvest::engine;

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  WorkflowRegistry r;
  r.add("bench", [](WorkflowContext&, Json in) { return in; });
  EngineConfig config;
  config.profile = Profile::kDev;
  config.pool_size = 20;
  auto engine = Engine::open(config, std::move(r));
  if (!engine) {
    fmt::print(stderr, "{}\n", engine.error().message);
    return 1;
  }
  fmt::print("{:<8} {:<6} {:>10} {:>9} {:>9} {:>9}\n", "callers", "keyed", "starts/s", "p50 ms",
             "p99 ms", "RSS MiB");
  for (bool keyed : {false, true}) {
    for (int callers : {1, 16}) {
      std::atomic<bool> stop{false};
      std::atomic<long> errors{0};
      std::mutex mu;
      std::vector<double> lat_us;
      std::vector<std::jthread> threads;
      auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < callers; ++c) {
        threads.emplace_back([&, c] {
          std::vector<double> local;
          long i = 0;
          while (!stop) {
            StartRequest req{
                .workflow = "bench",
                .input = Json{{"caller", c}, {"i", i}, {"pad", std::string(200, 'x')}}};
            if (keyed) req.idempotency_key = fmt::format("bench-{}-{}-{}", keyed, c, i);
            auto s = std::chrono::steady_clock::now();
            auto res = (*engine)->start(req);
            local.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s)
                    .count());
            if (!res) ++errors;
            ++i;
          }
          std::lock_guard lock(mu);
          lat_us.insert(lat_us.end(), local.begin(), local.end());
        });
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      threads.clear();
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("{:<8} {:<6} {:>10.0f} {:>9.2f} {:>9.2f} {:>9.1f}{}\n", callers,
                 keyed ? "yes" : "no", lat_us.size() / elapsed, bench::percentile_ms(lat_us, 0.5),
                 bench::percentile_ms(lat_us, 0.99), bench::rss_mib(),
                 errors ? fmt::format("  ({} errors)", errors.load()) : "");
    }
  }
  return 0;
}
