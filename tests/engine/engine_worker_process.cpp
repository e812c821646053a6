// A worker in its own process, for the engine's process-level tests: the
// engine over --db with the workflows below.
// - `aborts` (the poison-pill test, ENG-18): its first step calls
//   std::abort() — the process dies as a segfault or an OOM kill would, with
//   no outcome recorded and its leases left to lapse. Every incarnation uses
//   the same --instance-id, so the next one takes the dead one's runs back at
//   once (as a restarted pod does).
// - `progresses` (the poison-pill test's long run): five steps s0..s4, of
//   which this process executes one and dies (std::abort) at the next, so
//   each incarnation records exactly one step more than the last; a step at
//   or past its input (an int) always aborts, a point the run never gets
//   past. Prints "step <i>" for a step it records and "crashing" as it dies.
// - `sleeps` (the clock-skew test, ENG-21, run under faketime): prints
//   "invoked" each time a claim runs it, then sleeps durably for its input
//   in milliseconds.
// - `keyed` (the per-key concurrency test, ENG-19): concurrency key
//   input["account"], at most 2 per key; its one step counts itself in and
//   out of harvest_test_key_load (n, and the highest n seen as peak) around
//   a 20 ms pause.
// - `locked` (the durable mutex test, ENG-20): takes the lock "ledger", then
//   appends (run, 'begin') to harvest_test_ledger and pauses 100 ms, sleeps
//   durably 20 ms and appends (run, 'end'); prints "holding <execution id>"
//   as the first step runs.
//
// HARVEST_TEST_LEASE_MS, when set, is the worker's lease (default 30 s).
//
//   engine_worker_process --db URL --instance-id ID [--seconds N]
//
// Prints "ready" as its worker starts, then works for --seconds (default 60)
// and exits 0 after stopping the worker in order; 1 on bad usage or when the
// engine cannot open.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "keyed_workflow.hpp"
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;
using harvest::engine::testing::keyed_options;

namespace {

// This run thread's own connection to the test database, for the workflows
// that write where the test can read.
store::Connection& test_db(const std::string& db) {
  thread_local std::unique_ptr<store::Connection> conn;
  if (!conn) {
    auto c = store::Connection::open(db);
    if (!c) throw std::runtime_error(c.error().describe());
    conn = std::move(*c);
  }
  return *conn;
}

void append_to_ledger(const std::string& db, const std::string& run, const char* phase) {
  auto r = test_db(db).exec("INSERT INTO harvest_test_ledger (run, phase) VALUES ($1, $2)",
                            {run, phase});
  if (!r) throw std::runtime_error(r.error().describe());
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, instance;
  int seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--db") {
      db = argv[i + 1];
    } else if (flag == "--instance-id") {
      instance = argv[i + 1];
    } else if (flag == "--seconds") {
      seconds = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 1;
    }
  }
  if (db.empty() || instance.empty()) {
    std::cerr << "usage: engine_worker_process --db URL --instance-id ID [--seconds N]\n";
    return 1;
  }
  engine::WorkflowRegistry workflows;
  workflows.add("aborts", [](engine::WorkflowContext& ctx, int) {
    ctx.step("crash", [] {
      std::cout << "crashing" << std::endl;
      std::abort();
    });
    return 0;
  });
  workflows.add("progresses", [](engine::WorkflowContext& ctx, int passable) {
    static std::atomic<int> executed{0};  // step bodies this process ran
    for (int i = 0; i < 5; ++i) {
      ctx.step("s" + std::to_string(i), [i, passable] {
        if (i >= passable || executed++ >= 1) {
          std::cout << "crashing" << std::endl;
          std::abort();
        }
        std::cout << "step " << i << std::endl;
      });
    }
    return 5;
  });
  workflows.add(
      "keyed",
      [db](engine::WorkflowContext& ctx, engine::Json input) {
        const std::string account = input.at("account").get<std::string>();
        ctx.step("work", [&] {
          store::Connection* conn = &test_db(db);
          auto in = conn->exec(
              "UPDATE harvest_test_key_load SET n = n + 1, peak = GREATEST(peak, n + 1) "
              "WHERE key = $1",
              {account});
          if (!in) throw std::runtime_error(in.error().describe());
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          auto out =
              conn->exec("UPDATE harvest_test_key_load SET n = n - 1 WHERE key = $1", {account});
          if (!out) throw std::runtime_error(out.error().describe());
        });
        return 0;
      },
      keyed_options());
  workflows.add("locked", [db](engine::WorkflowContext& ctx, int n) {
    auto guard = ctx.lock("ledger");
    ctx.step("begin", [&] {
      std::cout << "holding " << ctx.execution_id() << std::endl;
      append_to_ledger(db, ctx.execution_id(), "begin");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    });
    ctx.sleep(std::chrono::milliseconds(20));
    ctx.step("end", [&] { append_to_ledger(db, ctx.execution_id(), "end"); });
    return n;
  });
  workflows.add("sleeps", [](engine::WorkflowContext& ctx, int ms) {
    std::cout << "invoked" << std::endl;
    ctx.sleep(std::chrono::milliseconds(ms));
    return ms;
  });
  engine::EngineConfig config;
  config.database_url = db;
  config.instance_id = instance;
  config.pool_size = 4;
  auto engine = engine::Engine::open(config, std::move(workflows));
  if (!engine) {
    std::cerr << "cannot open the engine: " << engine.error().describe() << "\n";
    return 1;
  }
  std::chrono::milliseconds lease = std::chrono::seconds(30);
  if (const char* ms = std::getenv("HARVEST_TEST_LEASE_MS"))
    lease = std::chrono::milliseconds(std::atoi(ms));
  engine::Worker worker(**engine, {.concurrency = 4, .lease = lease});
  std::cout << "ready" << std::endl;  // before the first run can print
  worker.start();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  worker.stop();
  return 0;
}
