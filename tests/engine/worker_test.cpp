// ENG-3, ENG-7, ENG-8, ENG-10: durable runs, signals, throttle, retention.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "support/pg_fixture.hpp"
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class RunTest : public testing::PgTest {
 protected:
  void TearDown() override {
    fault::disarm_all();
    PgTest::TearDown();
  }
  std::string status_of(const std::string& id) {
    return text(::harvest::testing::kStatusById, {id});
  }
  bool wait_status(const std::string& id, const std::string& status,
                   std::chrono::milliseconds timeout = 20s) {
    return eventually([&] { return status_of(id) == status; }, timeout);
  }
};

// Worker sizing: a worker that names no concurrency is sized for runs that
// mostly wait — 8 run threads per hardware thread, 16 to 256 — or takes
// $HARVEST_WORKER_CONCURRENCY; an explicit value wins over both.
TEST(WorkerSizing, the_default_is_eight_per_hardware_thread_from_16_to_256) {
  EXPECT_EQ(Worker::default_concurrency(0), 16);  // unknown: as one
  EXPECT_EQ(Worker::default_concurrency(1), 16);
  EXPECT_EQ(Worker::default_concurrency(2), 16);
  EXPECT_EQ(Worker::default_concurrency(4), 32);
  EXPECT_EQ(Worker::default_concurrency(16), 128);
  EXPECT_EQ(Worker::default_concurrency(64), 256);
  EXPECT_EQ(WorkerConfig{}.concurrency, 0) << "unset means sized by the worker";
}

TEST_F(RunTest, a_worker_naming_no_concurrency_takes_the_environment_or_the_default) {
  auto engine = open_engine(WorkflowRegistry{});
  const int sized = Worker::default_concurrency(std::thread::hardware_concurrency());
  ::unsetenv("HARVEST_WORKER_CONCURRENCY");
  EXPECT_EQ(Worker(*engine).concurrency(), sized);
  ::setenv("HARVEST_WORKER_CONCURRENCY", "7", 1);
  EXPECT_EQ(Worker(*engine).concurrency(), 7);
  EXPECT_EQ(Worker(*engine, {.concurrency = 3}).concurrency(), 3) << "explicit wins";
  for (const char* bad : {"many", "0", "-2", "7x", "100000"}) {
    ::setenv("HARVEST_WORKER_CONCURRENCY", bad, 1);
    EXPECT_EQ(Worker(*engine).concurrency(), sized) << bad;
  }
  ::unsetenv("HARVEST_WORKER_CONCURRENCY");
}

TEST_F(RunTest, steps_run_once_and_the_output_is_recorded) {
  std::atomic<int> side_effects{0};
  WorkflowRegistry r;
  r.add("two_steps", [&](WorkflowContext& ctx, int n) {
    int a = ctx.step("double", [&] {
      ++side_effects;
      return n * 2;
    });
    int b = ctx.step("add", [&] {
      ++side_effects;
      return a + 1;
    });
    return b;
  });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "two_steps", .input = 20});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 1});
  auto ran = worker.run_one();
  ASSERT_TRUE(ran && *ran);
  auto view = engine->get_execution(*s->execution_id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->status, "completed");
  EXPECT_EQ(view->output, 41);
  EXPECT_EQ(side_effects, 2);
  std::vector<std::string> kinds;
  for (const auto& h : view->history) kinds.push_back(h.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"WorkflowStarted", "StepCompleted", "StepCompleted",
                                             "WorkflowCompleted"}));
}

TEST_F(RunTest, a_crashed_worker_run_is_resumed_elsewhere_without_re_executing_recorded_steps) {
  std::atomic<int> charge_calls{0}, ship_calls{0};
  WorkflowRegistry r;
  r.add("order", [&](WorkflowContext& ctx, std::string id) {
    ctx.step("charge", [&] {
      ++charge_calls;
      return "charged " + id;
    });
    ctx.step("ship", [&] {
      ++ship_calls;
      return "shipped " + id;
    });
    return "done " + id;
  });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "order", .input = "A-1"});
  ASSERT_TRUE(s);

  // Worker A dies right after recording the first step: no outcome written,
  // lease left to lapse.
  fault::arm("worker.after_step_recorded", fault::Action::kThrow);
  Worker a(*engine, {.concurrency = 1, .lease = 600ms, .poll_interval = 20ms, .owner = "worker-a"});
  a.start();
  ASSERT_TRUE(eventually([&] { return a.crashed_threads() == 1; }));
  EXPECT_EQ(status_of(*s->execution_id), "running");
  EXPECT_TRUE(text("SELECT lease_owner FROM harvest_run_leases").starts_with("worker-a/"))
      << "the dead worker's claim still holds the lease";

  Worker b(*engine, {.concurrency = 1, .lease = 600ms, .poll_interval = 20ms, .owner = "worker-b"});
  b.start();
  ASSERT_TRUE(wait_status(*s->execution_id, "completed"));
  EXPECT_EQ(charge_calls, 1) << "a step recorded before the crash must not run again";
  EXPECT_EQ(ship_calls, 1);
  EXPECT_EQ(fault::fired("worker.after_step_recorded"), 1);
  auto view = engine->get_execution(*s->execution_id);
  EXPECT_EQ(view->output, "done A-1");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE kind = 'StepCompleted'"), 2);
}

TEST_F(RunTest,
       signal_with_start_from_8_threads_makes_one_run_that_receives_every_signal_in_db_order) {
  WorkflowRegistry r;
  r.add("collector", [](WorkflowContext& ctx, Json) {
    std::vector<int> got;
    while (got.size() < 8) {
      auto s = ctx.wait_signal("item", 30s);
      if (!s) break;
      got.push_back(s->at("n").get<int>());
    }
    return got;
  });
  auto engine = open_engine(std::move(r));
  Worker worker(*engine, {.concurrency = 2, .poll_interval = 10ms});
  worker.start();
  std::vector<Result<SignalWithStartOutcome>> results(8);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        results[i] = engine->signal_with_start({.workflow = "collector",
                                                .workflow_id = "basket-1",
                                                .signal = "item",
                                                .payload = {{"n", i}},
                                                .idempotency_key = "item-" + std::to_string(i)});
      });
    }
  }
  int started = 0;
  for (auto& res : results) {
    ASSERT_TRUE(res) << res.error().message;
    started += res->started;
    EXPECT_EQ(res->execution_id, results[0]->execution_id);
  }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
  ASSERT_TRUE(wait_status(results[0]->execution_id, "completed"));

  // Database order: the order of harvest_signals ids.
  auto rows = db().exec("SELECT (payload->>'n')::int AS n FROM harvest_signals ORDER BY id");
  ASSERT_TRUE(rows);
  Json expected = Json::array();
  for (int i = 0; i < rows->rows(); ++i) expected.push_back(std::stoi(rows->get(i, "n")));
  auto view = engine->get_execution(results[0]->execution_id);
  EXPECT_EQ(view->output, expected);
  EXPECT_EQ(view->output.size(), 8u);

  // A repeat of a staged signal key is a no-op.
  auto dup = engine->signal_with_start({.workflow = "collector",
                                        .workflow_id = "basket-1",
                                        .signal = "item",
                                        .payload = {{"n", 3}},
                                        .idempotency_key = "item-3"});
  ASSERT_TRUE(dup);
  EXPECT_TRUE(dup->duplicate_signal);
  EXPECT_FALSE(dup->started);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 8);
}

TEST_F(RunTest, a_waiting_run_is_woken_by_a_signal_and_times_out_without_one) {
  WorkflowRegistry r;
  r.add("approval", [](WorkflowContext& ctx, Json) {
    auto first = ctx.wait_signal("approve", 60s);
    auto second = ctx.wait_signal("approve", 300ms);
    return Json{{"first", first ? *first : Json(nullptr)}, {"second_timed_out", !second}};
  });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "approval"});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(wait_status(*s->execution_id, "waiting"));
  auto sig = engine->signal({.target = {.execution_id = s->execution_id},
                             .name = "approve",
                             .payload = {{"by", "ops"}},
                             .idempotency_key = "approval-1"});
  ASSERT_TRUE(sig) << sig.error().message;
  EXPECT_EQ(sig->kind, SignalOutcomeKind::kDelivered);
  auto dup = engine->signal({.target = {.execution_id = s->execution_id},
                             .name = "approve",
                             .idempotency_key = "approval-1"});
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->kind, SignalOutcomeKind::kDuplicate);
  ASSERT_TRUE(wait_status(*s->execution_id, "completed"));
  auto view = engine->get_execution(*s->execution_id);
  EXPECT_EQ(view->output, (Json{{"first", {{"by", "ops"}}}, {"second_timed_out", true}}));

  auto late = engine->signal({.target = {.execution_id = s->execution_id}, .name = "approve"});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().kind, ErrorKind::kConflict);
  auto missing = engine->signal(
      {.target = {.workflow = "approval", .workflow_id = "none"}, .name = "approve"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST_F(RunTest, durable_sleep_and_child_start_survive_replay) {
  std::atomic<int> before_sleep{0};
  WorkflowRegistry r;
  r.add("child", [](WorkflowContext&, int n) { return n * 10; });
  r.add("parent", [&](WorkflowContext& ctx, int n) {
    ctx.step("before", [&] { return ++before_sleep; });
    ctx.sleep(200ms);
    std::string child = ctx.start_child("child", n);
    return child;
  });
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "parent", .input = 4});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 2, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(wait_status(*s->execution_id, "completed"));
  auto view = engine->get_execution(*s->execution_id);
  std::string child_id = view->output.get<std::string>();
  ASSERT_TRUE(wait_status(child_id, "completed"));
  EXPECT_EQ(engine->get_execution(child_id)->output, 40);
  EXPECT_EQ(engine->get_execution(child_id)->start_source, "child");
  EXPECT_EQ(before_sleep, 1) << "the step before the sleep must not re-run after the wake-up";
  EXPECT_EQ(
      scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_name = 'child'"), 1);
}

TEST_F(RunTest, failed_runs_retry_with_backoff_then_fail_after_max_attempts) {
  std::atomic<int> calls{0};
  WorkflowRegistry r;
  r.add(
      "flaky",
      [&](WorkflowContext&, Json) -> int {
        ++calls;
        throw std::runtime_error("downstream unavailable");
      },
      WorkflowOptions{.max_attempts = 3, .retry_backoff = 50ms});
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "flaky"});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(wait_status(*s->execution_id, "failed"));
  EXPECT_EQ(calls, 3);
  auto view = engine->get_execution(*s->execution_id);
  EXPECT_EQ(view->attempt, 3);
  EXPECT_EQ(view->error, "downstream unavailable");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE kind = 'AttemptFailed'"), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE kind = 'WorkflowFailed'"),
            1);
}

TEST_F(RunTest, throttle_defers_starts_beyond_the_rate_then_fires_every_one) {
  WorkflowRegistry r;
  r.add(
      "notify", [](WorkflowContext&, int n) { return n; },
      WorkflowOptions{.throttle = ThrottlePolicy{.starts = 2, .period = 300ms}});
  auto engine = open_engine(std::move(r));
  int started = 0, deferred = 0;
  for (int i = 0; i < 7; ++i) {
    auto s =
        engine->start({.workflow = "notify", .workflow_id = "n-" + std::to_string(i), .input = i});
    ASSERT_TRUE(s) << s.error().message;
    if (s->kind == StartOutcomeKind::kStarted) ++started;
    if (s->kind == StartOutcomeKind::kDeferred) {
      ++deferred;
      EXPECT_FALSE(s->execution_id);
    }
  }
  EXPECT_EQ(started, 2);
  EXPECT_EQ(deferred, 5);
  // A deferred start repeated with its workflow_id collapses into the queued one.
  auto again = engine->start({.workflow = "notify", .workflow_id = "n-6", .input = 6});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, StartOutcomeKind::kDeferred);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_deferred_starts"), 5);

  auto keyed = engine->start({.workflow = "notify", .input = 1, .idempotency_key = "k"});
  ASSERT_FALSE(keyed);
  EXPECT_EQ(keyed.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(keyed.error().message.find("throttle"), std::string::npos);

  Worker worker(*engine, {.concurrency = 2, .poll_interval = 10ms, .admission_interval = 20ms});
  worker.start();
  ASSERT_TRUE(eventually([&] {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'") ==
           7;
  }));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_deferred_starts"), 0);
  EXPECT_EQ(scalar("SELECT count(DISTINCT workflow_id) FROM harvest_workflow_executions"), 7);
  // The rate held: no window of 300 ms saw more than 2 creations.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions a WHERE (SELECT count(*) "
                   "FROM harvest_workflow_executions b WHERE b.created_at >= a.created_at AND "
                   "b.created_at < a.created_at + interval '250 milliseconds') > 2"),
            0);
}

TEST_F(RunTest, retention_deletes_only_old_terminal_runs_with_their_events_and_signals) {
  WorkflowRegistry r;
  r.add("short_lived", [](WorkflowContext&, Json) { return 1; });
  r.add("audited", [](WorkflowContext&, Json) { return 1; });
  EngineConfig config;
  config.retention = RetentionConfig{}
                         .with_max_age(std::chrono::hours(1))
                         .with_workflow_max_age("audited", std::chrono::hours(24 * 30));
  auto engine = open_engine(std::move(r), config);
  auto make = [&](const std::string& wf, const std::string& wid) {
    auto s = engine->signal_with_start(
        {.workflow = wf, .workflow_id = wid, .signal = "note", .payload = {{"w", wid}}});
    EXPECT_TRUE(s);
    return s->execution_id;
  };
  std::string old_done = make("short_lived", "old-done");
  std::string old_failed = make("short_lived", "old-failed");
  std::string fresh_done = make("short_lived", "fresh-done");
  std::string old_live = make("short_lived", "old-live");
  std::string old_audited = make("audited", "old-audited");
  auto set = [&](const std::string& id, const std::string& status, const std::string& age) {
    ASSERT_TRUE(db().exec(
        "UPDATE harvest_workflow_executions SET status = $2, created_at = now() - $3::interval, "
        "completed_at = CASE WHEN $2 IN ('completed','failed') THEN now() - $3::interval END "
        "WHERE id = $1",
        {id, status, age}));
  };
  set(old_done, "completed", "2 hours");
  set(old_failed, "failed", "2 hours");
  set(fresh_done, "completed", "10 minutes");
  set(old_live, "waiting", "3 hours");
  set(old_audited, "completed", "2 days");

  auto deleted = engine->purge();
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(*deleted, 2);
  auto rows = db().exec("SELECT workflow_id FROM harvest_workflow_executions ORDER BY workflow_id");
  ASSERT_TRUE(rows);
  std::vector<std::string> left;
  for (int i = 0; i < rows->rows(); ++i) left.push_back(rows->get(i, 0));
  EXPECT_EQ(left, (std::vector<std::string>{"fresh-done", "old-audited", "old-live"}));
  for (const auto& gone : {old_done, old_failed}) {
    EXPECT_EQ(
        scalar("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1", {gone}), 0);
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE execution_id = $1", {gone}), 0);
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 3);
}

}  // namespace
}  // namespace harvest::engine

namespace harvest::engine {
namespace {

TEST_F(RunTest, a_step_result_postgres_cannot_store_fails_the_attempt_instead_of_looping) {
  WorkflowRegistry r;
  r.add(
      "nul_step",
      [](WorkflowContext& ctx, Json) {
        return ctx.step("nul", [] { return std::string("a\0b", 3); });
      },
      WorkflowOptions{.max_attempts = 2, .retry_backoff = 10ms});
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "nul_step"});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(wait_status(*s->execution_id, "failed"));
  auto view = engine->get_execution(*s->execution_id);
  EXPECT_EQ(view->attempt, 2);
  EXPECT_NE(view->error->find("cannot record StepCompleted 'nul'"), std::string::npos);
  auto dl = engine->list_dead_letters();
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->size(), 1u);
}

// Policy reject: a new signal for a finished run is refused, logged and
// counted; a known one still replays.
TEST_F(RunTest, signal_with_start_reject_refuses_a_new_signal_for_a_finished_run) {
  log::LogCapture capture;
  auto rec = std::make_shared<metrics::RecordingMetrics>();
  WorkflowRegistry r;
  r.add("entity", [](WorkflowContext&, Json) { return 1; });
  EngineConfig config;
  config.metrics = rec;
  auto engine = open_engine(std::move(r), config);
  auto first = engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k1"});
  ASSERT_TRUE(first);
  ASSERT_TRUE(db().exec("UPDATE harvest_workflow_executions SET status = 'completed'"));
  auto replay = engine->signal_with_start({.workflow = "entity",
                                           .workflow_id = "e",
                                           .signal = "s",
                                           .idempotency_key = "k1",
                                           .reuse = WorkflowIdReuse::kReject});
  ASSERT_TRUE(replay);
  EXPECT_TRUE(replay->duplicate_signal);
  auto fresh = engine->signal_with_start({.workflow = "entity",
                                          .workflow_id = "e",
                                          .signal = "s",
                                          .idempotency_key = "k2",
                                          .reuse = WorkflowIdReuse::kReject});
  ASSERT_FALSE(fresh);
  EXPECT_EQ(fresh.error().kind, ErrorKind::kConflict);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
  EXPECT_TRUE(capture.contains({"refused", "'e'", "accepts no more signals"}));
  EXPECT_EQ(rec->counter(metrics::kEngineSignalsRefused,
                         {{"workflow", "entity"}, {"reason", "run_closed"}}),
            1);
}

// Policy allow_after_close (the default): the next signal for a closed
// entity starts run 2 of the same workflow id; the signal dedupe spans the
// runs, so a replay of what run 1 got is not delivered to run 2.
TEST_F(RunTest, signal_with_start_starts_the_next_run_after_the_entity_run_closed) {
  WorkflowRegistry r;
  r.add("entity", [](WorkflowContext&, Json) { return 1; });
  auto engine = open_engine(std::move(r));
  auto first = engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k1"});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->run_no, 1);
  ASSERT_TRUE(db().exec("UPDATE harvest_workflow_executions SET status = 'completed'"));

  auto replay = engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k1"});
  ASSERT_TRUE(replay) << replay.error().message;
  EXPECT_TRUE(replay->duplicate_signal);
  EXPECT_FALSE(replay->started) << "a replay never opens a new run";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);

  auto next = engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k2"});
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_TRUE(next->started);
  EXPECT_EQ(next->run_no, 2);
  EXPECT_NE(next->execution_id, first->execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = 'e'"), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = 'e' AND "
                   "NOT superseded AND run_no = 2 AND status = 'pending'"),
            1);
  EXPECT_EQ(
      scalar("SELECT count(*) FROM harvest_signals WHERE execution_id = $1", {next->execution_id}),
      1);

  auto view1 = engine->get_execution(first->execution_id);
  auto view2 = engine->get_execution(next->execution_id);
  ASSERT_TRUE(view1 && view2);
  EXPECT_EQ(view1->run_no, 1);
  EXPECT_FALSE(view1->current) << "run 1 stays readable, marked superseded";
  EXPECT_EQ(view2->run_no, 2);
  EXPECT_TRUE(view2->current);

  // Run 1's redelivered signal, arriving after run 2 exists: still a replay.
  auto late = engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k1"});
  ASSERT_TRUE(late);
  EXPECT_TRUE(late->duplicate_signal);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 2);
  // A plain start of the same workflow id still dedupes onto the current run.
  auto start = engine->start({.workflow = "entity", .workflow_id = "e"});
  ASSERT_TRUE(start);
  EXPECT_EQ(start->kind, StartOutcomeKind::kIdempotentReplay);
}

// Entities outlive their runs: a signal staged after the entity run's last
// read, while it is finishing, is not stranded on the closed run: completion
// hands it to the next run of the workflow id, which receives it. Under
// policy reject the run is not followed (and the signal stays with the run
// that accepted it).
TEST_F(RunTest, a_signal_staged_as_the_entity_run_finishes_goes_to_its_next_run) {
  for (bool reject : {false, true}) {
    SCOPED_TRACE(reject ? "reject" : "allow_after_close");
    ASSERT_TRUE(
        db().exec_script("DELETE FROM harvest_signals; DELETE FROM harvest_workflow_events; "
                         "DELETE FROM harvest_workflow_executions"));
    std::atomic<bool> late_sent{false};
    Engine* self = nullptr;
    auto reuse = reject ? WorkflowIdReuse::kReject : WorkflowIdReuse::kAllowAfterClose;
    WorkflowRegistry r;
    r.add("session", [&](WorkflowContext& ctx, Json) {
      Json got = Json::array();
      while (auto s = ctx.wait_signal("reading", 300ms)) got.push_back(*s);
      // The session decided to end; a reading arrives before it completes.
      if (!late_sent.exchange(true)) {
        auto late = self->signal_with_start({.workflow = "session",
                                             .workflow_id = "dev",
                                             .signal = "reading",
                                             .payload = Json("late"),
                                             .idempotency_key = "k-late",
                                             .reuse = reuse});
        EXPECT_TRUE(late) << late.error().message;
        if (late) {
          EXPECT_FALSE(late->started) << "the run was still open";
        }
      }
      return got;
    });
    auto engine = open_engine(std::move(r));
    self = engine.get();
    ASSERT_TRUE(engine->signal_with_start({.workflow = "session",
                                           .workflow_id = "dev",
                                           .signal = "reading",
                                           .payload = Json("first"),
                                           .idempotency_key = "k-first",
                                           .reuse = reuse}));
    Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
    worker.start();
    const int runs = reject ? 1 : 2;
    ASSERT_TRUE(eventually(
        [&] {
          return scalar(
                     "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                     "'completed'") == runs;
        },
        20s));
    worker.stop();
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), runs);
    EXPECT_EQ(text("SELECT output::text FROM harvest_workflow_executions WHERE run_no = 1"),
              R"(["first"])");
    if (!reject) {
      EXPECT_EQ(text("SELECT output::text FROM harvest_workflow_executions WHERE run_no = 2"),
                R"(["late"])")
          << "the late reading reached run 2";
      EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e "
                       "ON e.id = s.execution_id WHERE e.run_no = 2 AND s.idempotency_key = "
                       "'k-late'"),
                1);
      // Dedupe still spans the runs: the late reading redelivered is a replay.
      auto again = engine->signal_with_start({.workflow = "session",
                                              .workflow_id = "dev",
                                              .signal = "reading",
                                              .payload = Json("late"),
                                              .idempotency_key = "k-late"});
      ASSERT_TRUE(again);
      EXPECT_TRUE(again->duplicate_signal);
    }
  }
}

// Many writers racing for a closed entity open exactly one next run.
TEST_F(RunTest, concurrent_signals_after_close_open_exactly_one_next_run) {
  WorkflowRegistry r;
  r.add("entity", [](WorkflowContext&, Json) { return 1; });
  auto engine = open_engine(std::move(r));
  ASSERT_TRUE(engine->signal_with_start(
      {.workflow = "entity", .workflow_id = "e", .signal = "s", .idempotency_key = "k0"}));
  ASSERT_TRUE(db().exec("UPDATE harvest_workflow_executions SET status = 'completed'"));
  std::vector<std::jthread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto s = engine->signal_with_start({.workflow = "entity",
                                          .workflow_id = "e",
                                          .signal = "s",
                                          .idempotency_key = "k" + std::to_string(t + 1)});
      if (s) ++ok;
    });
  }
  threads.clear();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE NOT superseded"), 1);
  EXPECT_EQ(scalar("SELECT max(run_no) FROM harvest_workflow_executions"), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e ON "
                   "e.id = s.execution_id WHERE e.run_no = 2"),
            8)
      << "every new signal reached run 2";
}

// ENG-3: the claim cursor skips the head of the runnable index, yet a run
// that became runnable below the cursor (a start committed late with an
// early run_after) is still claimed, by the scan from the start that follows
// a short cursor scan.
TEST_F(RunTest, a_run_below_the_claim_cursor_is_still_claimed) {
  WorkflowRegistry r;
  r.add("job", [](WorkflowContext&, Json in) { return in; });
  auto engine = open_engine(std::move(r));
  auto first = engine->start({.workflow = "job", .input = 1});
  ASSERT_TRUE(first);
  ExecutionStore store(db());
  std::optional<long long> cursor;
  auto a = store.claim({"job"}, "w", 60s, 1, std::nullopt, &cursor);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->size(), 1u);
  ASSERT_TRUE(cursor) << "the cursor moved to the claimed run";

  auto late = engine->start({.workflow = "job", .input = 2});
  ASSERT_TRUE(late);
  ASSERT_TRUE(db().exec(
      "UPDATE harvest_workflow_executions SET run_after = now() - interval '1 hour' WHERE id = $1",
      {*late->execution_id}));
  const auto before = cursor;
  auto b = store.claim({"job"}, "w", 60s, 5, std::nullopt, &cursor);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_EQ(b->size(), 1u) << "the fallback scan from the start found the late run";
  EXPECT_EQ(b->front().id, *late->execution_id);
  EXPECT_LT(*cursor, *before) << "the cursor follows what was claimed";
}

// A fresh deployment's run tables get statistics from the worker once they
// hold enough changes, instead of being planned from guesses until
// autovacuum's first pass.
TEST_F(RunTest, the_worker_analyzes_never_analyzed_run_tables_once_they_fill) {
  WorkflowRegistry r;
  r.add("job", [](WorkflowContext&, Json in) { return in; });
  auto engine = open_engine(std::move(r));
  auto tuples = [&] {
    return scalar(
        "SELECT reltuples::bigint FROM pg_class WHERE oid = "
        "'harvest_workflow_executions'::regclass");
  };
  ASSERT_EQ(tuples(), -1) << "a fresh table has never been analyzed";
  std::vector<StartRequest> batch;
  for (int i = 0; i < 1200; ++i) batch.push_back({.workflow = "job", .input = i});
  for (auto& s : engine->start_batch(batch)) ASSERT_TRUE(s) << s.error().message;
  Worker worker(*engine, {.concurrency = 2, .admission_interval = 20ms});
  worker.start();
  EXPECT_TRUE(eventually([&] { return tuples() >= 1000; }, 10s))
      << "the worker analyzed the executions table";
}

}  // namespace
}  // namespace harvest::engine
