// Coordinate collisions on the real broker: a topic deleted and recreated
// under an existing binding reuses offsets 0, 1, 2, …; harvest tells its
// records from redeliveries by their fingerprints and never acknowledges
// them as duplicates. Counts are read back from PostgreSQL and the group's
// commits from the broker.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kafka_connector_fixture.hpp"
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::kafka::testing {
namespace {

class KafkaCollisionTest : public KafkaConnectorTest {
 protected:
  // The consumer notices a deleted and recreated topic within a second.
  static KafkaSourceConfig quick(const std::string& group, const std::string& topic) {
    return config(group, topic).property("topic.metadata.refresh.interval.ms", "1000");
  }
  long long runs_of(const std::string& prefix) {
    return scalar(fmt::format(
        "SELECT count(*) FROM harvest_workflow_executions WHERE input->>'order_id' LIKE '{}-%'",
        prefix));
  }
  // The old incarnation of `topic`: `n` orders old-*, started and committed.
  void consume_old(const std::string& topic, const std::string& group, int n,
                   connector::CollisionPolicy policy) {
    Produced old;
    produce_orders(topic, 1, n, "old", old);
    auto source = connect(quick(group, topic));
    auto b = binding("orders", topic);
    b.on_collision(policy);
    auto rt = runtime(b, source, quick_config());
    {
      Consumer consumer(*rt);
      ASSERT_TRUE(eventually([&] { return runs_of("old") == n; }, 60s)) << runs_of("old");
      EXPECT_EQ(await_committed(group, topic, old.end), old.end);
    }
    source->close();
  }
  void recreate(const std::string& topic) {
    auto deleted = broker_->delete_topic(topic);
    ASSERT_TRUE(deleted) << deleted.error().message;
    // The broker may take a moment to let the name be used again.
    ASSERT_TRUE(eventually([&] { return broker_->create_topic(topic, 1).has_value(); }, 60s));
  }
};

// hold, under a running binding and again across a restart: the first
// colliding record is detected on its first delivery, nothing of the new
// topic is started or committed; after the operator rotates the namespace
// every record of the new topic starts exactly once.
TEST_F(KafkaCollisionTest, a_recreated_topic_holds_the_binding_until_the_namespace_rotates) {
  const auto topic = make_topic(1);
  const auto group = unique_name("g");
  constexpr int kOld = 30;
  constexpr int kNew = 40;  // offsets 0..29 collide, 30..39 are past the old end
  Produced old;
  produce_orders(topic, 1, kOld, "old", old);
  auto source = connect(quick(group, topic));
  auto rt = runtime(binding("orders", topic), source, quick_config());
  Produced fresh;
  {
    Consumer consumer(*rt);
    ASSERT_TRUE(eventually([&] { return runs_of("old") == kOld; }, 60s)) << runs_of("old");
    EXPECT_EQ(await_committed(group, topic, old.end), old.end);

    // Deleted and recreated under the running binding. The consumer's
    // fetch position (30) is past the empty new log: the broker answers
    // out of range and the consumer resets to the start, as librdkafka does
    // for any partition whose log was replaced, before the new records come.
    recreate(topic);
    std::this_thread::sleep_for(5s);
    produce_orders(topic, 1, kNew, "new", fresh);
    ASSERT_TRUE(eventually([&] { return rt->collision_hold().has_value(); }, 90s))
        << "the binding never met the recreated topic";
    std::this_thread::sleep_for(1s);  // anything it would wrongly do, it does now
  }
  const auto hold = *rt->collision_hold();
  EXPECT_NE(hold.find(fmt::format("{}:0:0", topic)), std::string::npos) << hold;
  EXPECT_NE(hold.find("key_incarnation"), std::string::npos) << hold;
  EXPECT_EQ(runs_of("new"), 0) << "no record of the new topic was started";
  EXPECT_EQ(runs_of("old"), kOld);
  EXPECT_GE(metrics_->counter(metrics::kConnectorCollisions, {{"source", "orders"}}), 1);
  for (const auto& [partition, offset] : committed(group, topic)) {
    EXPECT_LE(offset, 0) << "nothing of the new topic is committed (partition " << partition << ")";
  }
  rt.reset();
  source->close();

  // Restarted with the same namespace: held again on the first delivery.
  {
    auto again = connect(quick(group, topic));
    auto same = runtime(binding("orders", topic), again, quick_config());
    Consumer consumer(*same);
    EXPECT_TRUE(eventually([&] { return same->collision_hold().has_value(); }, 60s));
    EXPECT_EQ(runs_of("new"), 0);
  }

  // Rotated: every record of the new topic starts exactly once.
  auto rotated_source = connect(quick(group, topic));
  auto b = binding("orders", topic);
  b.key_incarnation("recreated-1");
  auto rotated = runtime(b, rotated_source, quick_config());
  {
    Consumer consumer(*rotated);
    EXPECT_EQ(await_committed(group, topic, fresh.end, 60s), fresh.end);
  }
  EXPECT_FALSE(rotated->collision_hold());
  EXPECT_EQ(runs_of("new"), kNew);
  EXPECT_EQ(scalar("SELECT count(DISTINCT input->>'order_id') FROM harvest_workflow_executions "
                   "WHERE input->>'order_id' LIKE 'new-%'"),
            kNew)
      << "each exactly once";
  EXPECT_EQ(executions(), kOld + kNew);
}

// dead_letter, with the application restarted between the deletion and the
// recreation: each colliding record is dead-lettered byte-exact, the rest of
// the new topic starts, everything is committed; after the rotation a
// replay starts each dead-lettered record exactly once.
TEST_F(KafkaCollisionTest, dead_lettered_collisions_replay_exactly_once_after_the_rotation) {
  const auto topic = make_topic(1);
  const auto group = unique_name("g");
  constexpr int kOld = 20;
  constexpr int kNew = 25;
  consume_old(topic, group, kOld, connector::CollisionPolicy::kDeadLetter);
  if (HasFatalFailure()) return;
  recreate(topic);
  Produced fresh;
  produce_orders(topic, 1, kNew, "new", fresh);

  auto store = std::make_shared<connector_dlq::DeadLetterStore>(engine_->pool());
  auto b = binding("orders", topic);
  b.on_collision(connector::CollisionPolicy::kDeadLetter);
  auto source = connect(quick(group, topic));
  auto rt = runtime(b, source, quick_config(), false);
  rt->with_dead_letter_sink(std::make_shared<connector::PostgresDeadLetterSink>(engine_->pool()));
  rt->with_replay_store(store);
  {
    Consumer consumer(*rt);
    EXPECT_EQ(await_committed(group, topic, fresh.end, 60s), fresh.end);
  }
  EXPECT_EQ(runs_of("new"), kNew - kOld) << "the records past the old end start";
  auto rows = store->list({});
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), static_cast<size_t>(kOld));
  for (const auto& row : *rows) {
    EXPECT_EQ(row.reason, "coordinate_collision");
    const auto offset = std::stoll(row.coordinates.substr(row.coordinates.rfind(':') + 1));
    EXPECT_EQ(row.payload, order_json(fmt::format("new-{}", offset))) << "byte-exact";
    EXPECT_TRUE(row.fingerprint);
  }
  EXPECT_FALSE(rt->collision_hold());
  rt.reset();
  source->close();

  b.key_incarnation("recreated-1");
  auto rotated = runtime(b, connect(quick(group, topic)), quick_config(), false);
  rotated->with_replay_store(store);
  auto marked = store->request_replay({.binding = "orders"}, "operator");
  ASSERT_TRUE(marked);
  EXPECT_EQ(marked->requested, static_cast<size_t>(kOld));
  size_t started = 0;
  for (int look = 0; look < 10 && started < static_cast<size_t>(kOld); ++look) {
    auto replayed = rotated->replay_requested();
    ASSERT_TRUE(replayed) << replayed.error().message;
    started += replayed->started;
  }
  EXPECT_EQ(started, static_cast<size_t>(kOld));
  EXPECT_EQ(runs_of("new"), kNew);
  EXPECT_EQ(scalar("SELECT count(DISTINCT input->>'order_id') FROM harvest_workflow_executions "
                   "WHERE input->>'order_id' LIKE 'new-%'"),
            kNew);
  EXPECT_EQ(executions(), kOld + kNew);
}

}  // namespace
}  // namespace harvest::kafka::testing
