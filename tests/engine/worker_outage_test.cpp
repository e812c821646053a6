// A worker through a database outage: its run threads keep trying to claim,
// each once per nap, and the log says so once when claims start failing,
// then at most once per 10 s, and once when they succeed again — not one
// line per thread per nap (32 a second from the quickstart behind a pooler,
// before). The store is a private cluster of the test's own, crashed and
// started again; work started before and after the outage completes.
#include <chrono>
#include <string>

#include "support/pg_fixture.hpp"
#include "support/private_cluster.hpp"
#include <harvest/common/log.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class WorkerOutageTest : public harvest::testing::PgTest {};

TEST_F(WorkerOutageTest, claims_failing_through_an_outage_are_logged_once_per_10s_not_per_thread) {
  harvest::testing::PrivateCluster pg("harvest-worker-outage-pg");
  auto url = pg.start();
  ASSERT_TRUE(url) << url.error().describe();
  WorkflowRegistry r;
  r.add("echo", [](WorkflowContext&, int n) { return n; });
  EngineConfig config;
  config.database_url = *url;
  config.profile = Profile::kDev;  // migrates the fresh cluster
  auto engine = Engine::open(config, std::move(r));
  ASSERT_TRUE(engine) << engine.error().describe();
  ASSERT_TRUE((*engine)->start({.workflow = "echo", .input = 1}));
  const auto completed = [&] {
    return pg.count("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'");
  };
  log::LogCapture capture(spdlog::level::info);
  Worker worker(**engine, {.concurrency = 8, .lease = 30s, .poll_interval = 20ms});
  worker.start();
  ASSERT_TRUE(eventually([&] { return completed() == 1; }, 20s));

  ASSERT_TRUE(pg.crash());
  // The outage itself: 4 s, some 200 naps of the eight run threads (not a
  // synchronisation wait).
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(capture.count_containing("worker cannot claim work"), 1u)
      << "one line when claims start failing, the next 10 s later";
  ASSERT_TRUE(pg.start());
  ASSERT_TRUE(
      eventually([&] { return capture.count_containing("worker claims work again") == 1; }, 30s))
      << "no line when claims succeed again";
  ASSERT_TRUE((*engine)->start({.workflow = "echo", .input = 2}));
  EXPECT_TRUE(eventually([&] { return completed() == 2; }, 20s)) << "work after the outage";
  worker.stop();
  EXPECT_EQ(capture.count_containing("worker cannot claim work"), 1u);
}

}  // namespace
}  // namespace harvest::engine
