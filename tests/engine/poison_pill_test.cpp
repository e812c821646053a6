// ENG-18: a run that kills every worker that claims it is contained. A real
// worker process (engine_worker_process) is restarted after each crash, as a
// supervisor would; after poison_pill_threshold (3) crashes the run is
// failed into the engine's dead letters with reason crashed_worker, and the
// fourth process stays up.
#include <chrono>
#include <string>

#include "support/pg_fixture.hpp"
#include "worker_process.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/engine/engine.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

using testing::WorkerProcess;

class PoisonPillTest : public harvest::testing::PgTest {};

TEST_F(PoisonPillTest, a_run_that_crashes_three_workers_is_dead_lettered_and_the_fourth_stays_up) {
  WorkflowRegistry r;
  r.add("aborts", [](WorkflowContext&, int) { return 0; });  // this process never runs it
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "aborts", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  const std::string instance = "poison-" + new_uuid().substr(0, 8);

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

  WorkerProcess fourth(db_url(), instance);
  ASSERT_TRUE(
      eventually([&] { return text(::harvest::testing::kStatusById, {id}) == "failed"; }, 60s))
      << "the fourth worker did not contain the run";
  EXPECT_FALSE(fourth.wait_exit(500ms)) << "the fourth worker process died";
  EXPECT_EQ(fourth.output(), "ready\n") << "the fourth worker must not run the workflow";
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

}  // namespace
}  // namespace harvest::engine
