// ENG-19: per-key concurrency. Three worker processes share 500 runs of a
// workflow limited to 2 running per key over 5 keys: each key's observed
// peak is exactly 2 and every run completes. A key function that throws
// refuses the start naming the cause.
#include <chrono>
#include <string>
#include <vector>

#include "keyed_workflow.hpp"
#include "support/pg_fixture.hpp"
#include "worker_process.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;
using testing::keyed_options;
using testing::WorkerProcess;

class ConcurrencyTest : public harvest::testing::PgTest {
 protected:
  static WorkflowRegistry keyed_registry() {
    WorkflowRegistry r;
    r.add(
        "keyed", [](WorkflowContext&, Json) { return 0; }, keyed_options());
    return r;
  }
};

TEST_F(ConcurrencyTest, five_hundred_runs_on_five_keys_across_processes_run_two_per_key_at_most) {
  ASSERT_TRUE(db().exec_script(
      "CREATE TABLE harvest_test_key_load (key text PRIMARY KEY, n int NOT NULL DEFAULT 0, "
      "peak int NOT NULL DEFAULT 0); "
      "INSERT INTO harvest_test_key_load (key) SELECT 'acct-' || i FROM generate_series(0, 4) i"));
  auto engine = open_engine(keyed_registry());
  std::vector<StartRequest> starts;
  for (int i = 0; i < 500; ++i) {
    starts.push_back(
        {.workflow = "keyed", .input = Json{{"account", "acct-" + std::to_string(i % 5)}}});
  }
  for (const auto& r : engine->start_batch(starts)) ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(scalar("SELECT count(DISTINCT concurrency_key) FROM harvest_workflow_executions"), 5);

  const std::string prefix = "keyed-" + new_uuid().substr(0, 8);
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int p = 0; p < 3; ++p) {
    workers.push_back(std::make_unique<WorkerProcess>(db_url(), prefix + "-" + std::to_string(p)));
  }
  ASSERT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                   "'completed'") == 500;
      },
      120s))
      << scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")
      << " of 500 completed";
  for (int k = 0; k < 5; ++k) {
    const std::string key = "acct-" + std::to_string(k);
    EXPECT_EQ(scalar("SELECT peak FROM harvest_test_key_load WHERE key = $1", {key}), 2) << key;
    EXPECT_EQ(scalar("SELECT n FROM harvest_test_key_load WHERE key = $1", {key}), 0) << key;
  }
  for (auto& w : workers) EXPECT_FALSE(w->wait_exit(0ms)) << "a worker process died";
}

TEST_F(ConcurrencyTest, a_key_function_that_throws_refuses_the_start_naming_the_cause) {
  auto engine = open_engine(keyed_registry());
  auto refused = engine->start({.workflow = "keyed", .input = Json{{"no_account", 1}}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(refused.error().message.find("concurrency key function of workflow 'keyed'"),
            std::string::npos)
      << refused.error().message;
  auto empty = engine->start({.workflow = "keyed", .input = Json{{"account", ""}}});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(empty.error().message.find("must not be empty"), std::string::npos)
      << empty.error().message;
  // An entity whose start input has no key signals an existing run only.
  auto sws = engine->signal_with_start(
      {.workflow = "keyed", .workflow_id = "e-1", .start_input = Json{{"x", 1}}, .signal = "s"});
  ASSERT_FALSE(sws);
  EXPECT_NE(sws.error().message.find("concurrency key"), std::string::npos) << sws.error().message;
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
}

TEST_F(ConcurrencyTest, a_finishing_run_lets_the_next_run_of_its_key_be_claimed_in_process) {
  WorkflowRegistry r;
  r.add(
      "one_at_a_time", [](WorkflowContext&, Json in) { return in; },
      WorkflowOptions{.concurrency = ConcurrencyPolicy{
                          .key = [](const Json&,
                                    const std::optional<std::string>&) { return std::string("k"); },
                          .max_per_key = 1}});
  auto engine = open_engine(std::move(r));
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(engine->start({.workflow = "one_at_a_time", .input = i}));
  Worker worker(*engine, {.concurrency = 4, .poll_interval = 5s});
  worker.start();
  // With a 5 s fallback poll, finishing in time needs each run's end to wake
  // the claim of the next.
  EXPECT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                   "'completed'") == 20;
      },
      15s));
  worker.stop();
}

}  // namespace
}  // namespace harvest::engine
