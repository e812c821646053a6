// CON-7, CON-13: the runtime's backstops. Whatever a dispatch throws, the
// message stays on the broker and the runtime keeps running; a rebuild that
// fails is retried with a growing back-off instead of stopping the binding
// or spinning on the broker.
#include <gtest/gtest.h>

#include <thread>

#include "connector_fixture.hpp"
#include <harvest/common/clock.hpp>
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;
using L = metrics::Labels;

// CON-13: an exception past the mapper's own guard (the map step itself
// throws) is a transient retry of that message alone: no ack, no dead
// letter, no strike; the others in the pass settle, and the redelivery starts it.
TEST_F(ConnectorTest, a_dispatch_that_throws_is_retried_and_never_acked_or_dead_lettered) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);
  for (const char* id : {"D-1", "D-2", "D-3"}) source->push_sqs(order_json(id));
  fault::arm("connector.map", fault::Action::kThrow);  // the first map of the pass
  auto first = rt->run_once();
  ASSERT_TRUE(first) << "the runtime survives the throw";
  EXPECT_EQ(fault::fired("connector.map"), 1);
  EXPECT_EQ(first->received, 3u);
  EXPECT_EQ(first->acked, 2u);
  EXPECT_EQ(first->retried, 1u);
  EXPECT_EQ(first->dead_lettered, 0u);
  EXPECT_EQ(executions(), 2);
  EXPECT_EQ(source->acked().size(), 2u);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "orders"}, {"reason", "transient"}}),
            1);
  source->expire_in_flight();
  auto second = rt->run_once();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->acked, 1u);
  EXPECT_EQ(executions(), 3) << "one execution per message, the thrown one included";
  EXPECT_TRUE(sink_->letters().empty());
}

// CON-13: the group commit itself throwing (a defect, not a per-item answer)
// leaves every message of the group unacked; nothing is lost or duplicated.
TEST_F(ConnectorTest, a_group_commit_that_throws_leaves_the_whole_group_for_redelivery) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);
  for (const char* id : {"G-1", "G-2", "G-3"}) source->push_sqs(order_json(id));
  fault::arm("connector.group_commit", fault::Action::kThrow);
  auto first = rt->run_once();
  ASSERT_TRUE(first);
  EXPECT_EQ(fault::fired("connector.group_commit"), 1);
  EXPECT_EQ(first->acked, 0u);
  EXPECT_EQ(first->retried, 3u);
  EXPECT_EQ(first->dead_lettered, 0u);
  EXPECT_EQ(executions(), 0) << "the throw came before the transaction";
  EXPECT_TRUE(source->acked().empty());
  source->expire_in_flight();
  auto second = rt->run_once();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->acked, 3u);
  EXPECT_EQ(executions(), 3);
  EXPECT_TRUE(sink_->letters().empty());
}

// CON-7: recover() failing (the broker cannot be reached while the consumer
// is rebuilt) is logged and retried after the back-off, doubling each time;
// the binding keeps running and the stall is answered once a rebuild works.
TEST_F(ConnectorTest, a_failing_recovery_backs_off_doubling_and_retries_until_it_works) {
  log::LogCapture capture;
  auto clock = std::make_shared<ManualClock>();
  ConnectorRuntimeConfig config;
  config.clock = clock;
  config.idle_backoff = 100ms;
  auto source = std::make_shared<MockSource>("orders.placed");
  source->clock(clock).fail_recoveries(2);
  auto b = order_binding();
  b.poison_threshold(2);
  auto rt = runtime(b, source, config);
  source->push_kafka(0, 0, order_json("reject-0"));  // a retried head: a stall at once
  source->push_kafka(0, 1, order_json("A-1"));
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });

  // Attempt 1 fails: the runtime waits 100 ms (manual time) before attempt 2.
  ASSERT_TRUE(eventually([&] { return source->recover_attempts() == 1; }));
  ASSERT_TRUE(clock->await_waiters(1));
  clock->advance(99ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(source->recover_attempts(), 1) << "no retry before the back-off elapses";
  clock->advance(1ms);
  // Attempt 2 fails too: now it waits 200 ms.
  ASSERT_TRUE(eventually([&] { return source->recover_attempts() == 2; }));
  ASSERT_TRUE(clock->await_waiters(1));
  clock->advance(199ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(source->recover_attempts(), 2) << "the back-off doubled";
  clock->advance(1ms);
  // Attempt 3 rebuilds; the redelivered head reaches its threshold and is
  // dead-lettered, and the partition commits past both records.
  ASSERT_TRUE(eventually([&] {
    if (source->committed(0) == 2) return true;
    clock->advance(100ms);  // idle waits after the rebuild
    return false;
  }));
  stop.request_stop();
  consumer.join();
  EXPECT_EQ(source->recover_attempts(), 3);
  EXPECT_EQ(source->recoveries(), 1);
  EXPECT_EQ(rt->recoveries(), 1u);
  EXPECT_TRUE(capture.contains({"recovery failed", "mock recovery failure", "retrying in 100 ms"}));
  EXPECT_TRUE(capture.contains({"recovery failed", "retrying in 200 ms"}));
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(executions(), 1);
}

}  // namespace
}  // namespace harvest::connector::testing
