// ENG-17: cancel (cooperative) and terminate (immediate), one run or many.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>

#include "run_checks.hpp"
#include "support/pg_fixture.hpp"
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class CancelTerminateTest : public testing::RunTest {
 protected:
  static StopRequest stop(const std::string& id, std::string reason = "operator said so") {
    return StopRequest{.execution_id = id, .reason = std::move(reason), .requested_by = "test"};
  }
};

TEST_F(CancelTerminateTest, a_waiting_run_sees_the_cancel_at_its_next_operation_and_compensates) {
  std::atomic<int> reserved{0}, released{0}, shipped{0};
  WorkflowRegistry r;
  r.add("order", [&](WorkflowContext& ctx, int) -> std::string {
    ctx.step("reserve", [&] { ++reserved; });
    try {
      auto go = ctx.wait_signal("go", std::chrono::hours(1));
      ctx.step("ship", [&] { ++shipped; });
      return "shipped";
    } catch (const Cancelled& c) {
      EXPECT_EQ(c.reason(), "customer withdrew");
      EXPECT_TRUE(ctx.cancelled());
      ctx.step("release", [&] { ++released; });
      return "released";
    }
  });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "order", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 20ms});
  worker.start();
  ASSERT_TRUE(wait_status(id, "waiting"));

  auto c = engine->cancel(stop(id, "customer withdrew"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->kind, StopOutcomeKind::kRequested);
  ASSERT_TRUE(wait_status(id, "cancelled"));
  worker.stop();

  EXPECT_EQ(reserved, 1);
  EXPECT_EQ(released, 1);
  EXPECT_EQ(shipped, 0);
  auto view = engine->get_execution(id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->output, "released");
  EXPECT_EQ(kinds(*engine, id),
            (std::vector<std::string>{"WorkflowStarted", "StepCompleted", "SignalDeadline",
                                      "CancelRequested", "Cancelled", "StepCompleted",
                                      "WorkflowCancelled"}));
  for (const auto& h : view->history) {
    if (h.kind == "CancelRequested") {
      EXPECT_EQ(h.payload.value("reason", ""), "customer withdrew");
      EXPECT_EQ(h.payload.value("requested_by", ""), "test");
    }
  }
  // Repeats are idempotent; the run is not touched again.
  auto again = engine->cancel(stop(id));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, StopOutcomeKind::kAlreadyRequested);
  EXPECT_EQ(again->status, "cancelled");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 "
                   "AND kind = 'CancelRequested'",
                   {id}),
            1);
}

TEST_F(CancelTerminateTest, a_running_run_learns_of_the_cancel_from_its_lease_renewal) {
  std::atomic<int> ticks{0};
  WorkflowRegistry r;
  r.add("ticker", [&](WorkflowContext& ctx, int) {
    for (int i = 0; i < 100000; ++i) {
      ctx.step("tick", [&] {
        ++ticks;
        std::this_thread::sleep_for(10ms);
      });
    }
    return 0;
  });
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  auto engine = open_engine(std::move(r), EngineConfig{.metrics = metrics});
  auto s = engine->start({.workflow = "ticker", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  Worker worker(*engine, {.concurrency = 1, .lease = 600ms, .poll_interval = 20ms});
  worker.start();
  ASSERT_TRUE(eventually([&] { return ticks.load() >= 5; }));
  ASSERT_TRUE(engine->cancel(stop(id)));
  ASSERT_TRUE(wait_status(id, "cancelled", 10s));
  worker.stop();
  // Not caught: no step ran after the one where it was delivered.
  const long long steps = scalar(
      "SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 AND kind = "
      "'StepCompleted'",
      {id});
  EXPECT_EQ(steps, ticks.load());
  EXPECT_EQ(scalar("SELECT max(op_seq) FROM harvest_workflow_events WHERE execution_id = $1", {id}),
            steps);  // the Cancelled op follows the last step
  EXPECT_EQ(text("SELECT kind FROM harvest_workflow_events WHERE execution_id = $1 AND op_seq = "
                 "$2",
                 {id, std::to_string(steps)}),
            "Cancelled");
  EXPECT_EQ(metrics->counter(metrics::kEngineRunsCancelled, {{"workflow", "ticker"}}), 1);
}

TEST_F(CancelTerminateTest, terminate_ends_the_run_at_once_and_fences_the_worker_executing_it) {
  std::latch in_step(1), let_go(1);
  std::atomic<int> second{0};
  WorkflowRegistry r;
  r.add("slow", [&](WorkflowContext& ctx, int) {
    ctx.step("first", [&] {
      in_step.count_down();
      let_go.wait();
    });
    ctx.step("second", [&] { ++second; });
    return 0;
  });
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  auto engine = open_engine(std::move(r), EngineConfig{.metrics = metrics});
  auto s = engine->start({.workflow = "slow", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 20ms});
  worker.start();
  in_step.wait();

  auto t = engine->terminate(stop(id, "stuck on a dead dependency"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->kind, StopOutcomeKind::kTerminated);
  EXPECT_EQ(status_of(id), "terminated");
  let_go.count_down();
  // The worker's write of "first" is refused and it stops the run.
  ASSERT_TRUE(eventually([&] {
    return scalar(
               "SELECT count(*) FROM harvest_workflow_executions e WHERE id = $1 AND NOT EXISTS "
               "(SELECT 1 FROM harvest_run_leases l WHERE l.execution_id = e.id)",
               {id}) == 1;
  }));
  std::this_thread::sleep_for(300ms);
  worker.stop();
  EXPECT_EQ(second, 0);
  EXPECT_EQ(status_of(id), "terminated");
  EXPECT_EQ(kinds(*engine, id),
            (std::vector<std::string>{"WorkflowStarted", "WorkflowTerminated"}));
  auto view = engine->get_execution(id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->error, "stuck on a dead dependency");
  EXPECT_EQ(view->history.back().payload.value("requested_by", ""), "test");
  EXPECT_EQ(metrics->counter(metrics::kEngineRunsTerminated, {{"workflow", "slow"}}), 1);

  auto again = engine->terminate(stop(id));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, StopOutcomeKind::kAlreadyTerminated);
  auto cancel = engine->cancel(stop(id));
  ASSERT_FALSE(cancel);
  EXPECT_EQ(cancel.error().kind, ErrorKind::kConflict);
  EXPECT_NE(cancel.error().message.find("terminated"), std::string::npos);
}

TEST_F(CancelTerminateTest,
       closed_runs_unknown_ids_and_bad_reasons_are_refused_naming_the_problem) {
  WorkflowRegistry r;
  r.add("noop", [](WorkflowContext&, int n) { return n; });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "noop", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  Worker worker(*engine, {.concurrency = 1});
  ASSERT_TRUE(worker.run_one());
  ASSERT_EQ(status_of(id), "completed");

  for (bool term : {false, true}) {
    auto done = term ? engine->terminate(stop(id)) : engine->cancel(stop(id));
    ASSERT_FALSE(done);
    EXPECT_EQ(done.error().kind, ErrorKind::kConflict);
    EXPECT_NE(done.error().message.find("completed"), std::string::npos);

    auto unknown = term ? engine->terminate(stop("7b0e0b6e-2f7d-4a53-9f7e-000000000000"))
                        : engine->cancel(stop("not-a-uuid"));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().kind, ErrorKind::kNotFound);

    auto empty = engine->cancel(stop(id, ""));
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().kind, ErrorKind::kBadRequest);
    auto long_reason = engine->terminate(stop(id, std::string(kMaxStopReason + 1, 'x')));
    ASSERT_FALSE(long_reason);
    EXPECT_EQ(long_reason.error().kind, ErrorKind::kBadRequest);
    EXPECT_NE(long_reason.error().message.find("1024"), std::string::npos);
    auto nul = engine->cancel(stop(id, std::string("a\0b", 3)));
    ASSERT_FALSE(nul);
    EXPECT_EQ(nul.error().kind, ErrorKind::kBadRequest);
  }
  EXPECT_EQ(status_of(id), "completed");
}

TEST_F(CancelTerminateTest, bulk_cancel_and_terminate_touch_only_the_open_runs_the_filter_names) {
  WorkflowRegistry r;
  r.add("a", [](WorkflowContext&, int n) { return n; });
  r.add("b", [](WorkflowContext&, int n) { return n; });
  auto engine = open_engine(std::move(r));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine->start({.workflow = "a", .input = i}));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(engine->start({.workflow = "b", .input = i}));

  auto preview = engine->cancel_where({.workflow = "a"}, "drain", "test", true);
  ASSERT_TRUE(preview);
  EXPECT_EQ(preview->matched, 5);
  EXPECT_EQ(preview->stopped, 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE cancel_requested_at IS "
                   "NOT NULL"),
            0);
  auto done = engine->cancel_where({.workflow = "a"}, "drain", "test", false);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->stopped, 5);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE cancel_requested_at IS "
                   "NOT NULL AND workflow_name = 'a'"),
            5);
  auto repeat = engine->cancel_where({.workflow = "a"}, "drain", "test", false);
  ASSERT_TRUE(repeat);
  EXPECT_EQ(repeat->stopped, 0) << "a pending request is not recorded twice";

  auto wrong =
      engine->terminate_where({.workflow = "b", .status = "completed"}, "x", "test", false);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().kind, ErrorKind::kBadRequest);
  auto term = engine->terminate_where({.workflow = "b", .status = "pending"}, "x", "test", false);
  ASSERT_TRUE(term);
  EXPECT_EQ(term->stopped, 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'terminated'"),
            2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_name = 'a' "
                   "AND status = 'pending'"),
            5);

  // The cancelled runs end at their first durable operation... which these
  // workflows never reach: they complete, the request unseen.
  Worker worker(*engine, {.concurrency = 1});
  while (true) {
    auto ran = worker.run_one();
    ASSERT_TRUE(ran);
    if (!*ran) break;
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'"),
            5);
}

TEST_F(CancelTerminateTest, a_terminated_entity_run_follows_the_workflow_id_reuse_policy) {
  WorkflowRegistry r;
  r.add("account", [](WorkflowContext& ctx, Json) {
    (void)ctx.wait_signal("op", std::chrono::hours(1));
    return 0;
  });
  auto engine = open_engine(std::move(r));
  auto first = engine->signal_with_start(
      {.workflow = "account", .workflow_id = "acct-1", .signal = "op", .idempotency_key = "k1"});
  ASSERT_TRUE(first);
  ASSERT_TRUE(engine->terminate(stop(first->execution_id)));

  auto rejected = engine->signal_with_start({.workflow = "account",
                                             .workflow_id = "acct-1",
                                             .signal = "op",
                                             .idempotency_key = "k2",
                                             .reuse = WorkflowIdReuse::kReject});
  ASSERT_FALSE(rejected);
  EXPECT_EQ(rejected.error().kind, ErrorKind::kConflict);
  auto next = engine->signal_with_start(
      {.workflow = "account", .workflow_id = "acct-1", .signal = "op", .idempotency_key = "k3"});
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->started);
  EXPECT_EQ(next->run_no, 2);
  EXPECT_NE(next->execution_id, first->execution_id);

  auto direct = engine->signal({.target = {.execution_id = first->execution_id}, .name = "op"});
  ASSERT_FALSE(direct);
  EXPECT_EQ(direct.error().kind, ErrorKind::kConflict);
}

TEST_F(CancelTerminateTest, retention_purges_cancelled_and_terminated_runs) {
  WorkflowRegistry r;
  r.add("w", [](WorkflowContext&, int n) { return n; });
  auto engine =
      open_engine(std::move(r), EngineConfig{.retention = RetentionConfig{}.with_max_age(1s)});
  auto s = engine->start({.workflow = "w", .input = 1});
  ASSERT_TRUE(s);
  ASSERT_TRUE(engine->terminate(stop(*s->execution_id)));
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET completed_at = now() - interval '1 hour'"));
  auto purged = engine->purge();
  ASSERT_TRUE(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events"), 0);
}

}  // namespace
}  // namespace harvest::engine
