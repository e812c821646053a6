// Cluster identity on real brokers: a binding records the id of the Kafka
// cluster it reads, per key incarnation; pointed at a second broker (its
// own cluster id) it refuses to start, naming both ids, until the cutover
// is acknowledged. Run by tests/kafka/second_cluster_test.sh, which starts
// the second broker and sets HARVEST_TEST_KAFKA_SECOND_BOOTSTRAP.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "kafka_connector_fixture.hpp"

namespace harvest::kafka::testing {
namespace {

class SecondClusterTest : public KafkaConnectorTest {};

TEST_F(SecondClusterTest, a_binding_moved_to_another_cluster_refuses_to_start_until_acknowledged) {
  const char* second = std::getenv("HARVEST_TEST_KAFKA_SECOND_BOOTSTRAP");
  ASSERT_TRUE(second != nullptr && *second != '\0')
      << "HARVEST_TEST_KAFKA_SECOND_BOOTSTRAP is not set: run tests/kafka/second_cluster_test.sh";
  auto other = TestBroker::connect(second);
  ASSERT_TRUE(other) << other.error().message;
  const auto topic = make_topic(1);
  ASSERT_TRUE((*other)->create_topic(topic, 1));
  const auto group = unique_name("g");
  auto on_first = connect(config(group, topic));
  auto on_second = connect(KafkaSourceConfig(second, group, topic)
                               .property("auto.offset.reset", "earliest")
                               .property("session.timeout.ms", "6000"));
  ASSERT_TRUE(on_first && on_second);
  const auto first_id = on_first->cluster_id();
  const auto second_id = on_second->cluster_id();
  ASSERT_TRUE(first_id && second_id);
  ASSERT_NE(*first_id, *second_id) << "two brokers, two clusters";

  // First start: the cluster is recorded.
  ASSERT_NO_THROW(plugin().connector(binding("orders", topic), on_first).build());
  EXPECT_EQ(text("SELECT cluster_id FROM harvest_connector_clusters WHERE binding = 'orders'"),
            *first_id);

  // The same binding and incarnation on the second cluster: refused.
  try {
    (void)plugin().connector(binding("orders", topic), on_second).build();
    ADD_FAILURE() << "a binding pointed at another cluster started";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(*first_id), std::string::npos) << what;
    EXPECT_NE(what.find(*second_id), std::string::npos) << what;
    EXPECT_NE(what.find("key_incarnation"), std::string::npos) << what;
    EXPECT_NE(what.find("cluster_cutover"), std::string::npos) << what;
  }

  // Acknowledged: it starts, and the second cluster is the binding's now.
  auto moved = binding("orders", topic);
  moved.cluster_cutover(*second_id);
  ASSERT_NO_THROW(plugin().connector(moved, on_second).build());
  EXPECT_EQ(text("SELECT cluster_id FROM harvest_connector_clusters WHERE binding = 'orders'"),
            *second_id);
  EXPECT_THROW((void)plugin().connector(binding("orders", topic), on_first).build(), ConfigError)
      << "the first cluster is the old one now";
}

}  // namespace
}  // namespace harvest::kafka::testing
