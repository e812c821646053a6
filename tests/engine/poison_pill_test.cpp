// ENG-18: a run that kills every worker that claims it is contained. A real
// worker process (engine_worker_process) is restarted after each crash, as a
// supervisor would; after poison_pill_threshold (3) crashes at the same
// point the run is failed into the engine's dead letters with reason
// crashed_worker, and the next worker (the same instance) stays up. A run
// that records progress between crashes is not a poison pill.
#include <chrono>
#include <string>

#include "support/pg_fixture.hpp"
#include "worker_process.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

using testing::WorkerProcess;

class PoisonPillTest : public harvest::testing::PgTest {};

TEST_F(PoisonPillTest, a_run_that_crashes_three_workers_is_dead_lettered_and_the_fourth_stays_up) {
  const std::string instance = "poison-" + new_uuid().substr(0, 8);
  auto rec = std::make_shared<metrics::RecordingMetrics>();
  WorkflowRegistry r;
  r.add("aborts", [](WorkflowContext&, int) { return 0; });  // must never run here
  EngineConfig config;
  config.instance_id = instance;  // the fourth worker is the processes' next incarnation
  config.metrics = rec;
  auto engine = open_engine(std::move(r), config);
  auto s = engine->start({.workflow = "aborts", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;

  for (int crash = 1; crash <= 3; ++crash) {
    WorkerProcess p(db_url(), instance);
    auto status = p.wait_exit(60s);
    ASSERT_TRUE(status) << "worker process " << crash << " did not crash on the run";
    ASSERT_TRUE(WIFSIGNALED(*status)) << "worker process " << crash << " exited normally";
    EXPECT_EQ(WTERMSIG(*status), SIGABRT);
    EXPECT_EQ(p.output(), "ready\ncrashing\n") << "it must die inside the workflow's step";
    // The first claim was of a pending run; each later one a takeover.
    EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}),
              crash - 1);
    EXPECT_EQ(text(::harvest::testing::kStatusById, {id}), "running");
  }

  // The fourth worker runs in this process: were it to call the workflow,
  // the run would complete instead of failing.
  {
    Worker fourth(*engine, {.concurrency = 2, .lease = 30s});
    fourth.start();
    ASSERT_TRUE(
        eventually([&] { return text(::harvest::testing::kStatusById, {id}) == "failed"; }, 60s))
        << "the fourth worker did not contain the run";
    fourth.stop();
  }
  EXPECT_EQ(rec->counter(metrics::kEngineRunsCrashed, {{"workflow", "aborts"}}), 1);
  EXPECT_EQ(rec->counter(metrics::kEngineRunsFailed, {{"workflow", "aborts"}}), 1);
  EXPECT_EQ(rec->counter(metrics::kEngineRunsCompleted, {{"workflow", "aborts"}}), 0);
  EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}), 3);
  EXPECT_EQ(text("SELECT reason FROM harvest_engine_dead_letters WHERE execution_id = $1", {id}),
            "crashed_worker");
  auto dead = engine->list_dead_letters();
  ASSERT_TRUE(dead);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ(dead->front().reason, "crashed_worker");
  EXPECT_NE(dead->front().error.find("crashed_worker"), std::string::npos) << dead->front().error;
  auto view = engine->get_execution(id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->history.back().kind, "WorkflowFailed");
  EXPECT_EQ(view->history.back().payload.value("reason", ""), "crashed_worker");

  // Replayed, it starts counting afresh.
  ASSERT_TRUE(engine->replay_dead_letter(id));
  EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}), 0);
}

// A long run that records a step between crashes is not a poison pill: each
// of four worker processes records one step more and dies, the count stays
// at 1 through every takeover (it would have reached 3 at the third and
// dead-lettered the run under the old meaning), and the fifth completes it.
TEST_F(PoisonPillTest, a_run_that_records_progress_between_crashes_survives_any_number_of_them) {
  const std::string instance = "progress-" + new_uuid().substr(0, 8);
  WorkflowRegistry r;
  r.add("progresses", [](WorkflowContext&, int) { return 0; });  // run by the processes only
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "progresses", .input = 5});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  const char* kCrashes = "SELECT crash_count FROM harvest_workflow_executions WHERE id = $1";
  const char* kSteps =
      "SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 AND kind = "
      "'StepCompleted'";

  for (int crash = 1; crash <= 4; ++crash) {
    WorkerProcess p(db_url(), instance);
    auto status = p.wait_exit(60s);
    ASSERT_TRUE(status) << "worker process " << crash << " did not crash on the run";
    ASSERT_TRUE(WIFSIGNALED(*status)) << "worker process " << crash << " exited normally";
    EXPECT_EQ(p.output(), "ready\nstep " + std::to_string(crash - 1) + "\ncrashing\n");
    EXPECT_EQ(scalar(kSteps, {id}), crash) << "each incarnation records one step more";
    // The first claim was of a pending run; each later takeover found a step
    // recorded since the one before and started the count again.
    EXPECT_EQ(scalar(kCrashes, {id}), crash == 1 ? 0 : 1) << "after crash " << crash;
  }
  WorkerProcess fifth(db_url(), instance);
  ASSERT_TRUE(
      eventually([&] { return text(::harvest::testing::kStatusById, {id}) == "completed"; }, 60s))
      << "the fifth worker did not finish the run: " << fifth.output();
  EXPECT_EQ(fifth.output(), "ready\nstep 4\n");
  EXPECT_EQ(scalar(kSteps, {id}), 5);
  EXPECT_EQ(
      scalar("SELECT count(*) FROM harvest_engine_dead_letters WHERE execution_id = $1", {id}), 0);
}

// Progress then a point the run never gets past: the first worker records
// s0 and dies at s1, and so do the next two (recording nothing); the count
// is the number of workers killed at s1, and the fourth claim contains it.
TEST_F(PoisonPillTest, crashes_after_the_last_recorded_step_add_up_to_the_threshold) {
  const std::string instance = "stuck-" + new_uuid().substr(0, 8);
  WorkflowRegistry r;
  r.add("progresses", [](WorkflowContext&, int) { return 0; });
  EngineConfig config;
  config.instance_id = instance;
  auto engine = open_engine(std::move(r), config);
  auto s = engine->start({.workflow = "progresses", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  const char* kCrashes = "SELECT crash_count FROM harvest_workflow_executions WHERE id = $1";
  for (int crash = 1; crash <= 3; ++crash) {
    WorkerProcess p(db_url(), instance);
    auto status = p.wait_exit(60s);
    ASSERT_TRUE(status && WIFSIGNALED(*status)) << "worker process " << crash;
    EXPECT_EQ(p.output(), crash == 1 ? "ready\nstep 0\ncrashing\n" : "ready\ncrashing\n");
    EXPECT_EQ(scalar(kCrashes, {id}), crash - 1) << "after crash " << crash;
  }
  Worker fourth(*engine, {.concurrency = 2, .lease = 30s});
  fourth.start();
  ASSERT_TRUE(
      eventually([&] { return text(::harvest::testing::kStatusById, {id}) == "failed"; }, 60s));
  fourth.stop();
  EXPECT_EQ(scalar(kCrashes, {id}), 3);
  EXPECT_EQ(text("SELECT reason FROM harvest_engine_dead_letters WHERE execution_id = $1", {id}),
            "crashed_worker");
}

}  // namespace
}  // namespace harvest::engine
