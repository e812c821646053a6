// CON-14 / KAF-5 through the runtime with the broker frozen (SIGSTOP): the
// lag sample is abandoned within its budget (logged, gauge untouched) and
// consumption resumes once the broker is thawed. Freezes the shared test
// broker, so ctest runs it serially (RUN_SERIAL in CMakeLists.txt).
#include <gtest/gtest.h>

#include <stop_token>
#include <thread>

#include "frozen_broker.hpp"
#include "kafka_connector_fixture.hpp"
#include <harvest/common/log.hpp>

namespace harvest::kafka::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

TEST_F(KafkaConnectorTest, lag_sample_is_abandoned_within_its_budget_while_the_broker_is_frozen) {
  auto pid = broker_pid(broker_->bootstrap());
  ASSERT_TRUE(pid) << pid.error().message;

  const auto topic = make_topic(2);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, 2, 10, "before-freeze", produced);

  constexpr auto kBudget = 1s;  // lag_sample_interval: the interval and the budget
  auto cfg = quick_config();
  cfg.lag_sample_interval = kBudget;
  const metrics::Labels gauge{{"source", "orders"}};
  const auto lag = [&] { return metrics_->gauge(metrics::kConnectorLag, gauge); };
  log::LogCapture capture;
  auto rt = runtime(binding("orders", topic), connect(config(group, topic)), cfg);
  std::jthread consumer([&](std::stop_token stop) {
    auto status = rt->run(stop);
    EXPECT_TRUE(status) << status.error().message;
  });

  ASSERT_TRUE(eventually([&] { return executions() == 10; }, 60s)) << executions();
  ASSERT_EQ(await_committed(group, topic, produced.end), produced.end);
  ASSERT_TRUE(eventually([&] { return lag() == std::optional<double>(0); }, 30s))
      << "no in-budget sample after the backlog was committed";
  // A first sample may overrun its 1 s budget while the group coordinator is
  // still being found; only what the freeze causes counts below.
  const auto before_freeze = capture.count_containing("lag sample exceeded its budget");

  {
    FrozenBroker frozen(*pid);
    const auto frozen_at = SteadyClock::now();
    // A sentinel no real sample can produce: an abandoned sample must not
    // overwrite it.
    metrics_->set_gauge(metrics::kConnectorLag, gauge, -1);
    // The next sample is due at most one interval after the last one
    // completed, and is abandoned one budget later; a pass may add a poll.
    const bool abandoned = eventually(
        [&] { return capture.count_containing("lag sample exceeded its budget") > before_freeze; },
        10s);
    const auto took = SteadyClock::now() - frozen_at;
    frozen.thaw();
    ASSERT_TRUE(abandoned) << "no over-budget sample was reported while the broker was frozen";
    EXPECT_LT(took,
              kBudget + kBudget + cfg.poll_timeout + 1500ms * harvest::testing::kSanitizerSlowdown)
        << "the sample was not abandoned at its budget";
    EXPECT_TRUE(capture.contains({"binding 'orders'", "budget of 1000 ms", "abandoned"}));
    EXPECT_EQ(lag(), std::optional<double>(-1)) << "an abandoned sample reached the gauge";
  }

  // Thawed: consumption resumes and sampling recovers.
  produce_orders(topic, 2, 6, "after-thaw", produced);
  EXPECT_TRUE(eventually([&] { return executions() == 16; }, 60s)) << executions();
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
  EXPECT_TRUE(eventually([&] { return lag() == std::optional<double>(0); }, 30s))
      << "lag after the thaw: " << lag().value_or(-2);
  consumer.request_stop();
  consumer.join();
  EXPECT_EQ(execution_refs(), produced.refs);
}

}  // namespace
}  // namespace harvest::kafka::testing
