// ENG-20: the durable mutex. Fifty runs over three worker processes append
// to one table inside the lock, one of the processes is killed (-9) while
// its run holds it: the appends never interleave, and the killed holder's
// run keeps the lock until it finishes on another worker. Waiters are served
// in the order they asked; the lock passes on when its guard leaves scope,
// and when its run fails or is terminated; a run cancelled while waiting
// leaves the line.
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "run_checks.hpp"
#include "support/pg_fixture.hpp"
#include "worker_process.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;
using testing::WorkerProcess;

class MutexTest : public testing::RunTest {
 protected:
  // The run is in line for `name` and parked (status waiting).
  bool wait_queued(const std::string& id, const std::string& name, bool granted) {
    return eventually(
        [&] {
          return scalar(
                     "SELECT count(*) FROM harvest_mutex_queue q JOIN harvest_workflow_executions "
                     "e ON e.id = q.execution_id WHERE q.execution_id = $1 AND q.name = $2 AND "
                     "e.status = 'waiting' AND (q.granted_at IS NOT NULL) = $3::boolean",
                     {id, name, granted ? "true" : "false"}) == 1;
        },
        20s);
  }
  std::string start(Engine& e, const std::string& workflow, Json input) {
    auto s = e.start({.workflow = workflow, .input = std::move(input)});
    EXPECT_TRUE(s) << s.error().message;
    return s ? s->execution_id.value_or("") : "";
  }
  static StopRequest stop(const std::string& id) {
    return StopRequest{.execution_id = id, .reason = "test", .requested_by = "test"};
  }
};

TEST_F(MutexTest, fifty_runs_over_three_processes_never_interleave_and_a_killed_holder_keeps_it) {
  ASSERT_TRUE(db().exec_script(
      "CREATE TABLE harvest_test_ledger (id bigserial PRIMARY KEY, run text NOT NULL, "
      "phase text NOT NULL)"));
  WorkflowRegistry r;
  r.add("locked", [](WorkflowContext&, int n) { return n; });  // run by the processes only
  auto engine = open_engine(std::move(r));
  std::vector<StartRequest> starts;
  for (int i = 0; i < 50; ++i) starts.push_back({.workflow = "locked", .input = i});
  for (const auto& s : engine->start_batch(starts)) ASSERT_TRUE(s) << s.error().message;

  const std::string prefix = "mutex-" + new_uuid().substr(0, 8);
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int p = 0; p < 3; ++p) {
    workers.push_back(
        std::make_unique<WorkerProcess>(db_url(), prefix + "-" + std::to_string(p),
                                        std::vector<std::string>{"HARVEST_TEST_LEASE_MS=2000"}));
  }
  ASSERT_TRUE(eventually(
      [&] { return scalar("SELECT count(*) FROM harvest_test_ledger WHERE phase = 'end'") >= 10; },
      60s));

  // Kill the process executing the lock's holder. The holder may move on
  // between the look and the kill, so a kill counts only when the run was
  // still running on that process afterwards (its lease names the dead).
  std::string victim;
  for (int tries = 0; tries < 2 && victim.empty(); ++tries) {
    std::string holder, owner;
    ASSERT_TRUE(eventually(
        [&] {
          auto rows = db().exec(
              "SELECT q.execution_id::text AS id, l.lease_owner FROM harvest_mutex_queue q "
              "JOIN harvest_run_leases l ON l.execution_id = q.execution_id WHERE q.name = "
              "'ledger' AND q.granted_at IS NOT NULL");
          if (!rows || rows->empty()) return false;
          holder = rows->get(0, "id");
          owner = rows->get(0, "lease_owner");
          return true;
        },
        20s));
    int p = -1;
    for (int i = 0; i < 3; ++i) {
      if (workers[i] && owner.starts_with(prefix + "-" + std::to_string(i) + "@")) p = i;
    }
    if (p < 0) continue;
    workers[p]->kill();
    workers[p].reset();
    if (scalar("SELECT count(*) FROM harvest_run_leases WHERE execution_id = $1 AND "
               "lease_owner = $2",
               {holder, owner}) == 1) {
      victim = holder;
    }
  }
  ASSERT_FALSE(victim.empty()) << "no process was killed while its run held the lock";

  ASSERT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                   "'completed'") == 50;
      },
      120s))
      << scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")
      << " of 50 completed";

  // The ledger, with repeats of one run merged (a step re-run after the
  // kill appends again): one block per run, each from begin to end.
  auto rows = db().exec("SELECT run, phase FROM harvest_test_ledger ORDER BY id");
  ASSERT_TRUE(rows);
  std::vector<std::pair<std::string, std::vector<std::string>>> blocks;
  for (int i = 0; i < rows->rows(); ++i) {
    const std::string run = rows->get(i, "run");
    if (blocks.empty() || blocks.back().first != run) blocks.push_back({run, {}});
    blocks.back().second.push_back(rows->get(i, "phase"));
  }
  std::map<std::string, int> seen;
  for (const auto& [run, phases] : blocks) {
    ++seen[run];
    EXPECT_EQ(phases.front(), "begin") << run;
    EXPECT_EQ(phases.back(), "end") << run;
  }
  EXPECT_EQ(blocks.size(), 50u) << "another run appended inside a holder's lock";
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_EQ(seen[victim], 1);
  EXPECT_EQ(status_of(victim), "completed");
  // It was granted once: the worker that took it over carried on holding.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 AND "
                   "kind = 'LockAcquired'",
                   {victim}),
            1);
  // The last run's worker sweeps its row just after writing its outcome.
  EXPECT_TRUE(
      eventually([&] { return scalar("SELECT count(*) FROM harvest_mutex_queue") == 0; }, 10s));
}

TEST_F(MutexTest, waiters_are_served_in_the_order_they_asked_and_a_guard_hands_back_at_scope_exit) {
  std::mutex mu;
  std::vector<int> order;
  WorkflowRegistry r;
  r.add("holder", [](WorkflowContext& ctx, int) {
    {
      auto guard = ctx.lock("L");
      (void)ctx.wait_signal("go", 1h);
    }
    ctx.step("after", [] {});
    return 0;
  });
  r.add("waiter", [&](WorkflowContext& ctx, int n) {
    auto guard = ctx.lock("L");
    ctx.step("mark", [&] {
      std::lock_guard lock(mu);
      order.push_back(n);
    });
    return n;
  });
  auto engine = open_engine(std::move(r));
  Worker worker(*engine, {.concurrency = 4, .poll_interval = 20ms});
  worker.start();
  const std::string holder = start(*engine, "holder", 0);
  ASSERT_TRUE(wait_queued(holder, "L", true));
  std::vector<std::string> waiters;
  for (int n = 1; n <= 3; ++n) {
    waiters.push_back(start(*engine, "waiter", n));
    ASSERT_TRUE(wait_queued(waiters.back(), "L", false)) << "waiter " << n;
  }
  ASSERT_TRUE(engine->signal({.target = {.execution_id = holder}, .name = "go"}));
  for (const auto& id : waiters) ASSERT_TRUE(wait_status(id, "completed"));
  ASSERT_TRUE(wait_status(holder, "completed"));
  worker.stop();

  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  // The guard left scope before "after": the lock went back first, at its
  // own position.
  EXPECT_EQ(kinds(*engine, holder),
            (std::vector<std::string>{"WorkflowStarted", "LockRequested", "LockAcquired",
                                      "SignalDeadline", "SignalReceived", "LockReleased",
                                      "StepCompleted", "WorkflowCompleted"}));
  // A waiter asked once and was granted once: woken, not polling.
  EXPECT_EQ(kinds(*engine, waiters.back()),
            (std::vector<std::string>{"WorkflowStarted", "LockRequested", "LockAcquired",
                                      "StepCompleted", "WorkflowCompleted"}));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_mutex_queue"), 0);
}

TEST_F(MutexTest,
       the_lock_passes_on_when_its_holder_fails_or_is_terminated_and_a_cancel_leaves_the_line) {
  WorkflowRegistry r;
  r.add(
      "holds",
      [](WorkflowContext& ctx, std::string name) {
        auto guard = ctx.lock(name);
        if (ctx.wait_signal("fail", 1h))
          ctx.step("boom", []() -> int { throw std::runtime_error("boom"); });
        return 0;
      },
      WorkflowOptions{.max_attempts = 1});
  r.add("waits", [](WorkflowContext& ctx, std::string name) {
    auto guard = ctx.lock(name);
    ctx.step("work", [] {});
    return 0;
  });
  auto engine = open_engine(std::move(r));
  Worker worker(*engine, {.concurrency = 4, .poll_interval = 20ms});
  worker.start();

  // Terminated holder; the first waiter is cancelled while in line.
  const std::string holder = start(*engine, "holds", "M");
  ASSERT_TRUE(wait_queued(holder, "M", true));
  const std::string cancelled = start(*engine, "waits", "M");
  ASSERT_TRUE(wait_queued(cancelled, "M", false));
  const std::string next = start(*engine, "waits", "M");
  ASSERT_TRUE(wait_queued(next, "M", false));
  ASSERT_TRUE(engine->cancel(stop(cancelled)));
  ASSERT_TRUE(wait_status(cancelled, "cancelled"));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_mutex_queue WHERE execution_id = $1", {cancelled}),
            0);
  EXPECT_EQ(status_of(next), "waiting");  // still behind the holder
  const auto terminated_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine->terminate(stop(holder)));
  // Woken by the hand-off, not by the periodic re-check (10 s).
  ASSERT_TRUE(wait_status(next, "completed", 8s));
  EXPECT_LT(std::chrono::steady_clock::now() - terminated_at, 5s);

  // Failed holder.
  const std::string failing = start(*engine, "holds", "F");
  ASSERT_TRUE(wait_queued(failing, "F", true));
  const std::string after = start(*engine, "waits", "F");
  ASSERT_TRUE(wait_queued(after, "F", false));
  const auto failed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine->signal({.target = {.execution_id = failing}, .name = "fail"}));
  ASSERT_TRUE(wait_status(failing, "failed"));
  ASSERT_TRUE(wait_status(after, "completed", 8s));
  EXPECT_LT(std::chrono::steady_clock::now() - failed_at, 5s);
  worker.stop();
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_mutex_queue"), 0);
}

TEST_F(MutexTest, a_bad_lock_name_or_a_second_take_of_a_held_lock_fails_the_run_naming_the_cause) {
  WorkflowRegistry r;
  r.add(
      "named",
      [](WorkflowContext& ctx, std::string name) {
        auto guard = ctx.lock(name);
        return 0;
      },
      WorkflowOptions{.max_attempts = 1});
  r.add(
      "twice",
      [](WorkflowContext& ctx, int) {
        auto first = ctx.lock("T");
        auto second = ctx.lock("T");
        return 0;
      },
      WorkflowOptions{.max_attempts = 1});
  auto engine = open_engine(std::move(r));
  Worker worker(*engine, {.concurrency = 2, .poll_interval = 20ms});
  worker.start();
  const std::string empty = start(*engine, "named", "");
  const std::string long_name = start(*engine, "named", std::string(201, 'x'));
  const std::string twice = start(*engine, "twice", 0);
  for (const auto& id : {empty, long_name, twice}) ASSERT_TRUE(wait_status(id, "failed")) << id;
  worker.stop();
  auto error_of = [&](const std::string& id) {
    auto v = engine->get_execution(id);
    return v && v->error ? *v->error : std::string();
  };
  EXPECT_NE(error_of(empty).find("lock name must be 1..200 bytes, got 0 bytes"), std::string::npos)
      << error_of(empty);
  EXPECT_NE(error_of(long_name).find("got 201 bytes"), std::string::npos) << error_of(long_name);
  EXPECT_NE(error_of(twice).find("lock 'T' is already held by this run"), std::string::npos)
      << error_of(twice);
  // The failed run's place went with it.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_mutex_queue"), 0);
}

}  // namespace
}  // namespace harvest::engine
