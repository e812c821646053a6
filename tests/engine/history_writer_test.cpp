// Group commit of run history. A batch of records and completions from many
// runs gives each write the outcome it would get alone; one refused write
// never fails the others.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <random>
#include <thread>

#include "support/pg_fixture.hpp"
#include <harvest/engine/history_writer.hpp>

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
    return text(::harvest::testing::kStatusById, {id});
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
  EXPECT_EQ(events(runs[3].id, "WorkflowCompleted"), 0) << "the row is the completion";
  auto completed = engine_->get_execution(runs[3].id);
  ASSERT_TRUE(completed) << completed.error().message;
  EXPECT_EQ(completed->history.back().kind, "WorkflowCompleted");
  EXPECT_EQ(completed->history.back().payload, (Json{{"done", 3}}));
  EXPECT_EQ(status_of(runs[4].id), "running") << "a stale lease completes nothing";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE id = $1 AND output "
                   "IS NULL AND completed_at IS NULL",
                   {runs[4].id}),
            1);
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

// A data race fixed: each waiter's outcome is published under the writer's
// lock. Many threads write at once with a random mix of outcomes — a record
// that lands, a record on a stale lease (a conflict), a completion the
// database refuses (a permanent error), a completion that lands — so commits
// run back to back and every waiter is woken by commits that are not its
// own. Each must get exactly its own outcome. Under ThreadSanitizer (the
// `tsan` preset in CI) a waiter reading an outcome the committer is still
// writing is a report.
TEST_F(HistoryWriterTest, many_threads_with_random_outcomes_each_get_their_own) {
  constexpr size_t kThreads = 12;
  constexpr size_t kWritesPerThread = 24;
  auto runs = claimed(kThreads);
  HistoryWriter writer(engine_->pool(), /*max_batch=*/5);
  const unsigned seed = std::random_device{}();
  std::printf("many_threads_with_random_outcomes seed=%u\n", seed);
  enum Kind { kLands, kStale, kRefused };
  std::atomic<size_t> mismatches{0};
  std::atomic<size_t> completed{0};
  std::vector<long long> landed(kThreads, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + static_cast<unsigned>(t));
      const Fence fence{runs[t].id, runs[t].lease};
      int op_seq = 1;
      for (size_t i = 0; i < kWritesPerThread; ++i) {
        const auto kind = static_cast<Kind>(rng() % 3);
        const RecordedOp op{"StepCompleted", "s" + std::to_string(op_seq), static_cast<int>(i)};
        if (kind == kLands) {
          auto r = writer.record(fence, op_seq++, op);
          if (!r) ++mismatches;
        } else if (kind == kStale) {
          auto r = writer.record({runs[t].id, "stale"}, op_seq, op);
          if (r || r.error().kind != ErrorKind::kConflict) ++mismatches;
        } else {
          auto r = writer.complete({"not-a-uuid", "x"}, static_cast<int>(i));
          if (r || !is_permanent(r.error())) ++mismatches;
        }
      }
      auto done = writer.complete(fence, static_cast<int>(t));
      if (done && *done) ++completed;
      landed[t] = op_seq - 1;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0u) << "seed " << seed;
  EXPECT_EQ(completed.load(), kThreads) << "seed " << seed;
  EXPECT_EQ(writer.writes(), kThreads * (kWritesPerThread + 1));
  EXPECT_LT(writer.commits(), writer.writes()) << "concurrent writes shared commits";
  for (size_t t = 0; t < kThreads; ++t) {
    EXPECT_EQ(status_of(runs[t].id), "completed") << t;
    EXPECT_EQ(events(runs[t].id, "StepCompleted"), landed[t]) << "run " << t << ", seed " << seed;
  }
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
