// Worker throughput: N one-step runs started in batches of 256, then a
// worker (concurrency 32) in the same process completes them; runs/s from the
// worker's start to the last completion, checked in PostgreSQL.
//   HARVEST_DATABASE_URL=... bench_engine_complete [runs=20000]
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "support/stats.hpp"
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;
using namespace harvest::engine;

namespace {
// Calls of the workflow so far: PostgreSQL is counted only once every run has
// been called (counting every few ms would take CPU from the worker).
std::atomic<long long> calls{0};
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  WorkflowRegistry r;
  r.add("bench_complete", [](WorkflowContext& ctx, Json in) {
    ++calls;
    return ctx.step("one", [&] { return in.size(); });
  });
  EngineConfig config;
  config.profile = Profile::kDev;
  config.pool_size = 20;
  auto engine = Engine::open(config, std::move(r));
  if (!engine) {
    fmt::print(stderr, "{}\n", engine.error().message);
    return 1;
  }
  auto db = store::Connection::open((*engine)->database_url());
  if (!db) return 1;
  (void)(*db)->exec(
      "WITH gone AS (DELETE FROM harvest_workflow_executions WHERE workflow_name = "
      "'bench_complete' RETURNING id) "
      "DELETE FROM harvest_workflow_events WHERE execution_id IN (SELECT id FROM gone)");
  for (int i = 0; i < n; i += 256) {
    std::vector<StartRequest> batch;
    for (int j = i; j < std::min(n, i + 256); ++j) {
      batch.push_back({.workflow = "bench_complete", .input = Json{{"i", j}}});
    }
    for (auto& res : (*engine)->start_batch(batch)) {
      if (!res) {
        fmt::print(stderr, "start failed: {}\n", res.error().message);
        return 1;
      }
    }
  }
  auto completed = [&] {
    auto c = (*db)->exec(
        "SELECT count(*) AS n FROM harvest_workflow_executions WHERE workflow_name = "
        "'bench_complete' AND status = 'completed'");
    return c ? c->get_int(0, "n") : -1;
  };
  const auto footprint = bench::Footprint::begin(**db);
  const auto t0 = std::chrono::steady_clock::now();
  Worker worker(**engine, {.concurrency = 32});
  worker.start();
  while (calls.load() < n || completed() < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  worker.stop();
  fmt::print("{} one-step runs completed in {:.2f} s: {:.0f} runs/s, RSS {:.1f} MiB\n", n, secs,
             n / secs, bench::rss_mib());
  // Claim, run, record and complete n started runs (the starts are not in it).
  bench::result_line("engine_complete", n / secs, 0, {}, bench::rss_mib(), footprint.end(**db, n));
  return 0;
}
