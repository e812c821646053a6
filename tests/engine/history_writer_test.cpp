// Issue 11 item 3: group commit of run history. A batch of records and
// completions from many runs gives each write the outcome it would get
// alone; one refused write never fails the others.
#include "engine/history_writer.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "support/pg_fixture.hpp"

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class HistoryWriterTest : public testing::PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    WorkflowRegistry r;
    r.add("job", [](WorkflowContext&, Json in) { return in; });
    engine_ = open_engine(std::move(r));
  }

  // Starts and claims `n` runs of "job" under one owner.
  std::vector<ClaimedRun> claimed(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(engine_->start({.workflow = "job", .input = static_cast<int>(i)}));
    }
    auto runs = ExecutionStore(db()).claim({"job"}, "w", 60s, n, std::nullopt);
    EXPECT_TRUE(runs) << runs.error().message;
    EXPECT_EQ(runs->size(), n);
    return *runs;
  }
  long long events(const std::string& id, const std::string& kind) {
    return scalar(
        "SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 AND kind = $2",
        {id, kind});
  }
  std::string status_of(const std::string& id) {
    return text("SELECT status FROM harvest_workflow_executions WHERE id = $1", {id});
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(HistoryWriterTest, each_write_of_a_batch_gets_the_outcome_it_would_get_alone) {
  auto runs = claimed(6);
  const auto fence = [&](size_t i) { return Fence{runs[i].id, runs[i].lease}; };
  // Run 2 already holds position 1: a second write there is refused.
  ASSERT_TRUE(ExecutionStore(db()).record_op(fence(2), 1, {"StepCompleted", "a", 1}));
  const RecordedOp step{"StepCompleted", "a", Json{{"v", 1}}};
  const RecordedOp null_step{"SignalTimedOut", "s", nullptr};
  std::vector<RunWrite> writes{
      {.fence = fence(0), .op_seq = 1, .op = step, .output = {}},
      {.fence = {runs[1].id, "stale-lease"}, .op_seq = 1, .op = step, .output = {}},
      {.fence = fence(2), .op_seq = 1, .op = step, .output = {}},
      {.fence = fence(3), .op_seq = 0, .op = std::nullopt, .output = Json{{"done", 3}}},
      {.fence = {runs[4].id, "stale-lease"}, .op_seq = 0, .op = std::nullopt, .output = 4},
      {.fence = fence(5), .op_seq = 1, .op = null_step, .output = {}},
  };
  auto r = ExecutionStore(db()).write_batch(writes);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<bool>{true, false, false, true, false, true}));

  EXPECT_EQ(events(runs[0].id, "StepCompleted"), 1);
  EXPECT_EQ(events(runs[1].id, "StepCompleted"), 0) << "a stale lease writes nothing";
  EXPECT_EQ(text("SELECT payload::text FROM harvest_workflow_events WHERE execution_id = $1 "
                 "AND op_seq = 1",
                 {runs[2].id}),
            "1")
      << "the position's first write stands";
  EXPECT_EQ(status_of(runs[3].id), "completed");
  EXPECT_EQ(
      text("SELECT output::text FROM harvest_workflow_executions WHERE id = $1", {runs[3].id}),
      R"({"done": 3})");
  EXPECT_EQ(events(runs[3].id, "WorkflowCompleted"), 1);
  EXPECT_EQ(status_of(runs[4].id), "running") << "a stale lease completes nothing";
  EXPECT_EQ(events(runs[4].id, "WorkflowCompleted"), 0);
  EXPECT_EQ(text("SELECT jsonb_typeof(payload) FROM harvest_workflow_events WHERE "
                 "execution_id = $1 AND op_seq = 1",
                 {runs[5].id}),
            "null")
      << "a JSON null is stored as a jsonb null, as a single record stores it";
}

TEST_F(HistoryWriterTest, a_batch_refused_as_a_whole_fails_nothing_written_by_the_others) {
  auto runs = claimed(1);
  std::vector<RunWrite> writes{
      {.fence = {runs[0].id, runs[0].lease}, .op_seq = 0, .op = std::nullopt, .output = 1},
      {.fence = {"not-a-uuid", "x"}, .op_seq = 0, .op = std::nullopt, .output = 2},
  };
  auto r = ExecutionStore(db()).write_batch(writes);
  ASSERT_FALSE(r);
  EXPECT_TRUE(is_permanent(r.error())) << r.error().describe();
  EXPECT_EQ(status_of(runs[0].id), "running") << "nothing of a refused batch is written";
}

// Writers that arrive while a commit is under way are committed together in
// the next one, each with its own outcome; the one the database refuses is
// found by writing the batch one by one.
TEST_F(HistoryWriterTest, writes_queued_behind_a_commit_share_the_next_and_keep_their_outcomes) {
  auto runs = claimed(9);
  HistoryWriter writer(engine_->pool());
  // Hold the first run's row so the first commit waits on it.
  auto blocker = store::Connection::open(db_url());
  ASSERT_TRUE(blocker);
  ASSERT_TRUE((*blocker)->exec("BEGIN"));
  ASSERT_TRUE((*blocker)->exec("SELECT 1 FROM harvest_workflow_executions WHERE id = $1 FOR UPDATE",
                               {runs[0].id}));
  auto first = std::async(std::launch::async, [&] {
    return writer.complete({runs[0].id, runs[0].lease}, 0);
  });
  ASSERT_TRUE(eventually([&] { return writer.waiting() == 0 && writer.commits() == 0; }));
  std::this_thread::sleep_for(50ms);  // the first commit is under way, blocked on the row
  std::vector<std::future<Result<bool>>> rest;
  for (size_t i = 1; i < runs.size(); ++i) {
    rest.push_back(std::async(std::launch::async, [&, i] {
      if (i == 4) return writer.complete({"not-a-uuid", "x"}, 4);
      return writer.complete({runs[i].id, runs[i].lease}, static_cast<int>(i));
    }));
  }
  ASSERT_TRUE(eventually([&] { return writer.waiting() == runs.size() - 1; })) << writer.waiting();
  ASSERT_TRUE((*blocker)->exec("COMMIT"));

  auto r0 = first.get();
  ASSERT_TRUE(r0 && *r0) << (r0 ? "fence lost" : r0.error().message);
  for (size_t i = 1; i < runs.size(); ++i) {
    auto r = rest[i - 1].get();
    if (i == 4) {
      ASSERT_FALSE(r) << "the malformed write fails alone";
      EXPECT_TRUE(is_permanent(r.error()));
      continue;
    }
    ASSERT_TRUE(r) << i << ": " << r.error().message;
    EXPECT_TRUE(*r) << i;
    EXPECT_EQ(status_of(runs[i].id), "completed") << i;
  }
  EXPECT_EQ(status_of(runs[4].id), "running") << "its own run was never written";
  EXPECT_EQ(writer.writes(), runs.size());
  EXPECT_EQ(writer.commits(), 2u) << "the eight queued writes shared one commit";
}

// Execution ids are time-ordered, so the indexes keyed on them (the
// executions' primary key, the events' execution index) grow at one edge.
TEST_F(HistoryWriterTest, execution_ids_are_time_ordered_uuids) {
  auto runs = claimed(2);
  for (const auto& r : runs) EXPECT_EQ(r.id.at(14), '7') << r.id;
}

TEST_F(HistoryWriterTest, a_lost_lease_is_a_conflict_for_a_record) {
  auto runs = claimed(1);
  HistoryWriter writer(engine_->pool());
  auto ok = writer.record({runs[0].id, runs[0].lease}, 1, {"StepCompleted", "a", 1});
  ASSERT_TRUE(ok) << ok.error().message;
  auto again = writer.record({runs[0].id, runs[0].lease}, 1, {"StepCompleted", "a", 2});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::kConflict);
  auto stale = writer.record({runs[0].id, "stale"}, 2, {"StepCompleted", "b", 1});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().kind, ErrorKind::kConflict);
}

}  // namespace
}  // namespace harvest::engine
