// Schema v2: the narrow run queue. A worker's hold on a run is a row of
// harvest_run_leases; a claim and its renewals never write the wide
// execution row, the outcome deletes the lease with the row's update, and a
// terminate racing a claim leaves no lease behind.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "support/pg_fixture.hpp"
#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class RunQueueTest : public testing::PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    WorkflowRegistry r;
    r.add("job", [](WorkflowContext&, Json in) { return in; });
    engine_ = open_engine(std::move(r));
  }
  std::vector<std::string> started(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      auto s = engine_->start({.workflow = "job", .input = i});
      EXPECT_TRUE(s && s->execution_id);
      ids.push_back(*s->execution_id);
    }
    return ids;
  }
  // The row version of an execution: changes whenever the row is written.
  std::string version(const std::string& id) {
    return text(
        "SELECT ctid::text || '/' || xmin::text FROM harvest_workflow_executions WHERE id = $1",
        {id});
  }
  long long leases(const std::string& id) {
    return scalar("SELECT count(*) FROM harvest_run_leases WHERE execution_id = $1", {id});
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(RunQueueTest, a_claim_and_its_renewals_write_the_lease_row_not_the_execution_row) {
  const auto ids = started(3);
  std::map<std::string, std::string> before;
  for (const auto& id : ids) before[id] = version(id);

  ExecutionStore store(db());
  auto runs = store.claim({"job"}, "w", 60s, 10, std::nullopt);
  ASSERT_TRUE(runs) << runs.error().message;
  ASSERT_EQ(runs->size(), 3u);
  for (const auto& run : *runs) {
    EXPECT_EQ(version(run.id), before[run.id]) << "the claim left the execution row as started";
    EXPECT_EQ(text("SELECT status FROM harvest_workflow_executions WHERE id = $1", {run.id}),
              "pending")
        << "a held run keeps the status it was claimed in";
    EXPECT_EQ(text(testing::kStatusById, {run.id}), "running");
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_run_leases WHERE execution_id = $1 AND "
                     "lease_owner = $2 AND workflow_name = 'job' AND lease_expires_at > now() + "
                     "interval '50 seconds'",
                     {run.id, run.lease}),
              1);
    auto view = engine_->get_execution(run.id);
    ASSERT_TRUE(view) << view.error().message;
    EXPECT_EQ(view->status, "running");
    EXPECT_EQ(view->lease_owner, run.lease);
  }
  auto again = store.claim({"job"}, "other", 60s, 10, std::nullopt);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty()) << "a held run is not claimed twice";

  // A renewal moves the lease rows' expiry and nothing else.
  const std::string expiry_before =
      text("SELECT max(lease_expires_at)::text FROM harvest_run_leases");
  std::this_thread::sleep_for(20ms);
  auto renewed = store.renew_leases({(*runs)[0].lease, (*runs)[1].lease}, 120s);
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_TRUE(renewed->empty()) << "no cancel requested";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_run_leases WHERE lease_expires_at > now() + "
                   "interval '100 seconds'"),
            2);
  EXPECT_NE(text("SELECT max(lease_expires_at)::text FROM harvest_run_leases"), expiry_before);
  for (const auto& run : *runs) EXPECT_EQ(version(run.id), before[run.id]);

  // Each outcome writes the execution row once and ends the lease with it.
  const auto fence = [&](size_t i) { return Fence{(*runs)[i].id, (*runs)[i].lease}; };
  auto done = store.complete(fence(0), Json{{"ok", true}}, false);
  ASSERT_TRUE(done && done->completed);
  EXPECT_EQ(text(testing::kStatusById, {(*runs)[0].id}), "completed");
  EXPECT_EQ(leases((*runs)[0].id), 0);
  auto parked = store.suspend(fence(1), (*runs)[1].signal_seq, 4102444800000LL);
  ASSERT_TRUE(parked && *parked);
  EXPECT_EQ(text(testing::kStatusById, {(*runs)[1].id}), "waiting");
  EXPECT_EQ(leases((*runs)[1].id), 0);
  auto retried = store.retry_later(fence(2), "boom", 0ms, 1);
  ASSERT_TRUE(retried && *retried);
  EXPECT_EQ(text(testing::kStatusById, {(*runs)[2].id}), "pending");
  EXPECT_EQ(leases((*runs)[2].id), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_run_leases"), 0);

  // A spent token fences nothing: every write with it is refused.
  EXPECT_FALSE(store.record_op(fence(2), 0, {"StepCompleted", "a", 1}));
  auto late = store.complete(fence(2), Json{{"late", true}}, false);
  ASSERT_TRUE(late);
  EXPECT_FALSE(late->completed);
  EXPECT_EQ(text(testing::kStatusById, {(*runs)[2].id}), "pending");
}

TEST_F(RunQueueTest, a_lapsed_lease_is_taken_over_once_and_the_old_token_is_fenced_off) {
  const auto ids = started(1);
  ExecutionStore store(db());
  auto first = store.claim({"job"}, "dead", 60s, 1, std::nullopt);
  ASSERT_TRUE(first && first->size() == 1u);
  const Fence old{(*first)[0].id, (*first)[0].lease};
  ASSERT_TRUE(db().exec("UPDATE harvest_run_leases SET lease_expires_at = now() - interval '1 s'"));

  auto second = store.claim({"job"}, "alive", 60s, 5, std::nullopt);
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ(second->size(), 1u) << "one run, taken over once";
  EXPECT_EQ((*second)[0].id, ids[0]);
  EXPECT_TRUE((*second)[0].lease.starts_with("alive/"));
  EXPECT_EQ((*second)[0].crash_count, 1) << "the takeover counts a crash (ENG-18)";
  EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {ids[0]}),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_run_leases"), 1);

  auto stale = store.record_op(old, 0, {"StepCompleted", "a", 1});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().kind, ErrorKind::kConflict);
  auto stale_done = store.complete(old, Json{1}, false);
  ASSERT_TRUE(stale_done);
  EXPECT_FALSE(stale_done->completed);
  ASSERT_TRUE(store.record_op({(*second)[0].id, (*second)[0].lease}, 0, {"StepCompleted", "a", 2}));
  auto done = store.complete({(*second)[0].id, (*second)[0].lease}, Json{2}, false);
  ASSERT_TRUE(done && done->completed);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_run_leases"), 0);
}

TEST_F(RunQueueTest, a_terminate_that_waited_for_a_claim_ends_the_lease_the_claim_took) {
  const auto ids = started(1);
  // A claim in flight: it holds the execution row's lock and has inserted
  // the lease, not yet committed (what a claim statement does, held open).
  auto claimer = store::Connection::open(db_url());
  ASSERT_TRUE(claimer);
  auto& c = **claimer;
  ASSERT_TRUE(c.exec("BEGIN"));
  ASSERT_TRUE(c.exec("SELECT id FROM harvest_workflow_executions WHERE id = $1 FOR NO KEY UPDATE",
                     {ids[0]}));
  ASSERT_TRUE(
      c.exec("INSERT INTO harvest_run_leases (execution_id, workflow_name, lease_owner, "
             "lease_expires_at) VALUES ($1, 'job', 'racer/1', now() + interval '1 min')",
             {ids[0]}));

  auto terminated = std::async(std::launch::async, [&] {
    return engine_->terminate(
        StopRequest{.execution_id = ids[0], .reason = "race", .requested_by = "test"});
  });
  EXPECT_EQ(terminated.wait_for(300ms), std::future_status::timeout)
      << "the terminate waits for the claim's row lock";
  ASSERT_TRUE(c.exec("COMMIT"));
  auto t = terminated.get();
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->kind, StopOutcomeKind::kTerminated);
  EXPECT_EQ(text(testing::kStatusById, {ids[0]}), "terminated");
  EXPECT_EQ(leases(ids[0]), 0) << "the lease the claim committed went with the terminate";
  EXPECT_FALSE(ExecutionStore(db()).record_op({ids[0], "racer/1"}, 0, {"StepCompleted", "a", 1}))
      << "the claimer's token fences nothing";
}

}  // namespace
}  // namespace harvest::engine
