// ENG-21: one clock. A worker process whose host clock is ten minutes ahead
// of, or behind, the database's (Debian's faketime moves its wall clock; its
// monotonic clock is left alone) runs a run with a durable 5 s sleep: the
// timer fires once, about 5 s of database time after it was set, and the run
// is claimed exactly twice (before and after the sleep) — no claim loop, no
// ten-minute wait.
#include <unistd.h>

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

// Debian's libfaketime, preloaded directly (the faketime command would run
// the worker as its child, out of the test's reach).
constexpr const char* kLibFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

class ClockSkewTest : public harvest::testing::PgTest,
                      public ::testing::WithParamInterface<const char*> {};

size_t count_lines(const std::string& text, const std::string& line) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(line + "\n", at)) != std::string::npos; at += line.size()) {
    ++n;
  }
  return n;
}

TEST_P(ClockSkewTest, a_timer_fires_once_on_database_time_whatever_the_host_clock_says) {
  ASSERT_EQ(::access(kLibFaketime, R_OK), 0)
      << kLibFaketime << " is missing: scripts/setup.sh installs Debian's faketime";
  WorkflowRegistry r;
  r.add("sleeps", [](WorkflowContext&, int ms) { return ms; });  // the child runs it
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "sleeps", .input = 5000});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;

  WorkerProcess worker(db_url(), "skew-" + new_uuid().substr(0, 8),
                       {std::string("LD_PRELOAD=") + kLibFaketime,
                        std::string("FAKETIME=") + GetParam(), "FAKETIME_DONT_FAKE_MONOTONIC=1",
                        // libfaketime is preloaded ahead of the sanitizer runtime.
                        "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0"});
  ASSERT_TRUE(
      eventually([&] { return text(::harvest::testing::kStatusById, {id}) == "completed"; }, 30s))
      << "the timer did not fire on database time; the worker printed: " << worker.output();

  // Fired once, about 5 s of database time after it was set.
  const long long fired_after_ms = scalar(
      "SELECT (extract(epoch FROM (SELECT created_at FROM harvest_workflow_events WHERE "
      "execution_id = $1 AND kind = 'TimerFired') - (SELECT created_at FROM "
      "harvest_workflow_events WHERE execution_id = $1 AND kind = 'TimerStarted')) * 1000)::bigint",
      {id});
  EXPECT_GE(fired_after_ms, 4800);
  EXPECT_LE(fired_after_ms, 8000);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1 AND "
                   "kind = 'TimerFired'",
                   {id}),
            1);
  // The deadline written is database time: 5 s after the timer was set.
  const long long deadline_error_ms = scalar(
      "SELECT abs((payload::text)::bigint - (extract(epoch FROM created_at) * 1000 + 5000))"
      "::bigint FROM harvest_workflow_events WHERE execution_id = $1 AND kind = 'TimerStarted'",
      {id});
  EXPECT_LE(deadline_error_ms, 1000) << "the deadline came from the skewed host clock";
  EXPECT_EQ(count_lines(worker.output(), "invoked"), 2u)
      << "claimed more than before and after the sleep: " << worker.output();
}

INSTANTIATE_TEST_SUITE_P(Skews, ClockSkewTest, ::testing::Values("+600", "-600"),
                         [](const auto& info) {
                           return std::string(info.param[0] == '+' ? "ahead" : "behind");
                         });

}  // namespace
}  // namespace harvest::engine
