// CON-7 (stall detection and recovery), CON-12, CON-14 (budgeted lag sampling).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "connector_fixture.hpp"
#include <harvest/common/clock.hpp>
#include <harvest/common/log.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;

TEST_F(ConnectorTest, a_retried_head_on_a_positional_source_is_stalled_at_once) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 10, order_json("reject-10"));
  source->push_kafka(0, 11, order_json("A-11"));
  source->push_kafka(0, 12, order_json("A-12"));
  auto r = rt->run_once();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ConnectorErrorKind::kStalled);
  ASSERT_TRUE(r.error().stall);
  EXPECT_EQ(r.error().stall->partition, (PartitionKey{"orders.placed", 0}));
  EXPECT_EQ(r.error().stall->head, 10);
  EXPECT_EQ(r.error().stall->depth, 2u);
  EXPECT_EQ(r.error().summary.acked, 2u);
  EXPECT_EQ(r.error().summary.retried, 1u);
  EXPECT_EQ(source->committed(0), std::nullopt) << "11 and 12 settled but 10 blocks the prefix";
  // Checked before the next receive too: a wedged binding pulls nothing more.
  source->push_kafka(0, 13, order_json("A-13"));
  auto again = rt->run_once();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().summary.received, 0u);
  EXPECT_EQ(source->pending(), 1u);
}

TEST_F(ConnectorTest, stall_threshold_zero_disables_only_the_backlog_heuristic) {
  ConnectorRuntimeConfig config;
  config.stall_threshold = 0;
  auto positional = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), positional, config);
  positional->push_kafka(0, 0, order_json("reject-0"));
  auto r = rt->run_once();
  ASSERT_FALSE(r) << "a retried head is still a stall with threshold 0";
  EXPECT_TRUE(r.error().stall->retried_head);

  // A positional stream whose abandon does redeliver: only the backlog can
  // reveal a head that is not settling.
  auto redelivering = std::make_shared<MockSource>("orders.placed");
  redelivering->abandon_redelivers(true).subscription("other");
  auto b = order_binding("orders2");
  b.poison_threshold(0);
  auto off = runtime(b, redelivering, config);
  auto on = runtime(order_binding("orders3"), redelivering);  // default threshold
  EXPECT_EQ(on->stall_threshold(), 64u) << "max(4 x 16, 32)";
  redelivering->push_kafka(0, 0, order_json("reject-0"));
  for (int o = 1; o <= 70; ++o) redelivering->push_kafka(0, o, order_json(std::to_string(o)));
  auto pass = off->run_once();
  ASSERT_TRUE(pass) << "threshold 0: no backlog stall";
  EXPECT_EQ(pass->acked, 63u);
  EXPECT_EQ(pass->retried, 1u);
  auto rest = off->run_once();
  ASSERT_TRUE(rest) << "70 completed behind the head, still no stall";
  EXPECT_EQ(rest->acked, 7u);
}

TEST_F(ConnectorTest, a_backlog_behind_an_unsettled_head_is_a_stall) {
  auto source = std::make_shared<MockSource>("orders.placed");
  source->abandon_redelivers(true);
  ConnectorRuntimeConfig config;
  config.stall_threshold = 5;
  auto b = order_binding();
  b.poison_threshold(0);
  auto rt = runtime(b, source, config);
  source->push_kafka(0, 0, order_json("reject-0"));
  for (int o = 1; o <= 4; ++o) source->push_kafka(0, o, order_json(std::to_string(o)));
  ASSERT_TRUE(rt->run_once()) << "4 completed behind the head: under the bound";
  source->push_kafka(0, 5, order_json("5"));
  auto r = rt->run_once();
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.error().stall->retried_head);
  EXPECT_EQ(r.error().stall->depth, 5u);
  EXPECT_EQ(r.error().stall->bound, 5u);
  EXPECT_NE(r.error().message.find("orders.placed[0]"), std::string::npos);
}

TEST_F(ConnectorTest, recovery_redelivers_and_strikes_survive_it_until_dead_letter) {
  auto source = std::make_shared<MockSource>("orders.placed");
  ConnectorRuntimeConfig config;
  config.idle_backoff = 10ms;
  auto rt = runtime(order_binding(), source, config);  // poison threshold 3
  source->push_kafka(0, 0, order_json("reject-0"));
  source->push_kafka(0, 1, order_json("A-1"));
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });
  ASSERT_TRUE(eventually([&] { return source->committed(0) == 2; }));
  stop.request_stop();
  consumer.join();
  EXPECT_EQ(source->recoveries(), 2) << "rejected twice, stalled twice, rebuilt twice";
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(sink_->letters()[0].attempts, 3) << "strikes were kept across recoveries";
  EXPECT_EQ(executions(), 1);
}

TEST_F(ConnectorTest, a_source_that_cannot_recover_stops_the_binding_with_an_error) {
  log::LogCapture capture;
  auto source = std::make_shared<MockSource>("orders.placed");
  source->recoverable(false);
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 0, order_json("reject-0"));
  std::stop_source never;
  auto result = rt->run(never.get_token());  // returns by itself
  ASSERT_FALSE(result);
  EXPECT_TRUE(capture.contains({"cannot rebuild itself", "orders", "stopping"}));
  EXPECT_EQ(source->recoveries(), 0);
}

TEST_F(ConnectorTest, max_batch_zero_is_floored_to_one) {
  ConnectorRuntimeConfig config;
  config.max_batch = 0;
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source, config);
  source->push_kafka(0, 0, order_json("A"));
  source->push_kafka(0, 1, order_json("B"));
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->received, 1u);
}

TEST_F(ConnectorTest, a_successful_lag_sample_sets_the_gauge) {
  ConnectorRuntimeConfig config;
  config.lag_sample_interval = 1s;
  auto source = std::make_shared<MockSource>("orders.placed");
  source->fixed_lag(42);
  auto rt = runtime(order_binding(), source, config);
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), 42);
}

TEST_F(ConnectorTest, an_over_budget_lag_sample_is_abandoned_and_the_next_waits_a_full_interval) {
  // Manual time: every decision below depends on the clock, not on how busy
  // the machine is.
  log::LogCapture capture;
  auto clock = std::make_shared<ManualClock>();
  ConnectorRuntimeConfig config;
  config.lag_sample_interval = 300ms;
  config.clock = clock;
  auto source = std::make_shared<MockSource>("orders.placed");
  source->fixed_lag(7).lag_delay(500ms).clock(clock);
  auto rt = runtime(order_binding(), source, config);
  source->push_kafka(0, 0, order_json("A"));
  const auto t0 = clock->now();

  // The pass asks for a sample and waits its budget; the sample sleeps 500 ms.
  auto pass = std::async(std::launch::async, [&] { return rt->run_once(); });
  ASSERT_TRUE(clock->await_waiters(2)) << "the pass and the sampler wait on the clock";
  clock->advance(300ms);
  auto s = pass.get();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->received, 1u) << "receive continues after an abandoned sample";
  EXPECT_EQ(clock->now() - t0, 300ms) << "the pass waited only the budget";
  EXPECT_TRUE(capture.contains({"lag sample exceeded its budget", "orders"}));
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), std::nullopt)
      << "gauge not updated";

  // While the abandoned sample still runs, no new sample starts.
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(source->lag_calls(), 1);
  // The sample completes at 500 ms; the next is due a full interval later.
  clock->advance(200ms);
  ASSERT_TRUE(eventually([&] { return clock->waiters() == 0; })) << "sample completed";
  clock->advance(100ms);  // t = 600 ms
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(source->lag_calls(), 1) << "the interval counts from the sample's completion";
  clock->advance(199ms);  // t = 799 ms
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(source->lag_calls(), 1) << "not due before 800 ms";
  source->lag_delay(0ms);
  clock->advance(1ms);  // t = 800 ms: due
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(source->lag_calls(), 2);
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), 7)
      << "an in-budget sample reaches the gauge";
}

// A sample the source itself gives up at its deadline (its broker could not
// answer in time) is reported as abandoned even when it returns before the
// pass stops waiting: the operator must hear about it either way.
TEST_F(ConnectorTest, a_sample_the_source_gives_up_is_reported_as_abandoned) {
  log::LogCapture capture;
  ConnectorRuntimeConfig config;
  config.lag_sample_interval = 5s;  // far beyond the answer: the pass sees it finish
  auto source = std::make_shared<MockSource>("orders.placed");
  source->fixed_lag(9).lag_unanswered(true);
  auto rt = runtime(order_binding(), source, config);
  metrics_->set_gauge(metrics::kConnectorLag, {{"source", "orders"}}, -1);
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(source->lag_calls(), 1);
  EXPECT_EQ(capture.count_containing("lag sample exceeded its budget of 5000 ms"), 1u);
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), -1)
      << "an abandoned sample leaves the gauge alone";
}

// CON-13: lag is sampled before the stall check, so a wedged binding keeps
// reporting what it owes while it pulls nothing more.
TEST_F(ConnectorTest, a_wedged_binding_keeps_reporting_its_lag) {
  ConnectorRuntimeConfig config;
  config.lag_sample_interval = 200ms;  // also the sample's budget
  auto source = std::make_shared<MockSource>("orders.placed");
  source->fixed_lag(3);
  auto rt = runtime(order_binding(), source, config);
  source->push_kafka(0, 10, order_json("reject-10"));
  source->push_kafka(0, 11, order_json("A-11"));
  auto first = rt->run_once();
  ASSERT_FALSE(first);
  ASSERT_EQ(first.error().kind, ConnectorErrorKind::kStalled);
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), 3);
  source->fixed_lag(9);
  std::this_thread::sleep_for(250ms);
  auto again = rt->run_once();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ConnectorErrorKind::kStalled);
  EXPECT_EQ(again.error().summary.received, 0u);
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorLag, {{"source", "orders"}}), 9)
      << "the stalled pass still sampled the lag";
}

}  // namespace
}  // namespace harvest::connector::testing
