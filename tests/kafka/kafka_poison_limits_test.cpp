// Input limits on the real broker: a record whose mapped workflow id is
// past the identifier limit (an 8 KB order id) is a permanent failure,
// dead-lettered with a readable reason; its partition keeps flowing and the
// group's commit reaches the log end — no endless retry, no stall.
#include <gtest/gtest.h>

#include "kafka_connector_fixture.hpp"
#include <harvest/engine/worker.hpp>

namespace harvest::kafka::testing {
namespace {

TEST_F(KafkaConnectorTest, a_record_over_the_identifier_limit_is_dead_lettered_not_retried) {
  constexpr int kPartitions = 2;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, 20, "before", produced);
  auto poison = broker_->produce(
      topic, Record{.partition = 0, .payload = order_json(std::string(8192, 'x'))});
  ASSERT_TRUE(poison) << poison.error().message;
  produced.end[0] = std::max(produced.end[0], *poison + 1);
  produce_orders(topic, kPartitions, 20, "after", produced);

  auto app = plugin()
                 .connector_with_config(binding("orders", topic), connect(config(group, topic)),
                                        quick_config())
                 .worker(engine::WorkerConfig{.concurrency = 2, .poll_interval = 20ms})
                 .metrics(metrics_)
                 .build();
  app->start();
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end)
      << "the partition with the oversized record must not wedge";
  EXPECT_TRUE(eventually([&] { return completed() == 40; }, 30s)) << completed();
  app->stop();

  EXPECT_EQ(executions(), 40);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters"), 1);
  EXPECT_EQ(text("SELECT reason FROM harvest_connector_dead_letters"), "start_rejected");
  const std::string detail = text("SELECT detail FROM harvest_connector_dead_letters");
  EXPECT_NE(detail.find("workflow_id"), std::string::npos) << detail;
  EXPECT_NE(detail.find("512"), std::string::npos) << detail;
  EXPECT_EQ(scalar("SELECT length(payload) FROM harvest_connector_dead_letters"),
            static_cast<long long>(order_json(std::string(8192, 'x')).size()));
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              {{"source", "orders"}, {"reason", "transient"}}),
            0)
      << "a permanent refusal is never retried";
}

}  // namespace
}  // namespace harvest::kafka::testing
