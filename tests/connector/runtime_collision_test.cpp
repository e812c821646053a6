// Coordinate collisions: a record at a position an earlier record used — a
// recreated topic, another cluster — is told from a redelivery by its
// fingerprint and never acknowledged as a duplicate. MockSource plays the
// broker (a recreated topic is a fresh source under the same binding name);
// the runs, signals, dead letters and keys are real PostgreSQL rows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "connector_fixture.hpp"
#include <harvest/connector/cluster_identity.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;

class CollisionTest : public ConnectorTest {
 protected:
  // Orders map to a fresh workflow id per message content, so the workflow
  // id never stands in for the coordinate key.
  static SourceBinding binding(CollisionPolicy policy = CollisionPolicy::kHold,
                               std::string incarnation = "") {
    auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
    b.map_json([](const MessageCtx& ctx, Order o) -> MapResult {
      return MappedMessage{fmt::format("order-{}@{}", o.order_id, render(ctx.coordinates())), o};
    });
    b.on_collision(policy);
    if (!incarnation.empty()) b.key_incarnation(std::move(incarnation));
    return b;
  }
  std::unique_ptr<ConnectorRuntime> replaying(const SourceBinding& b,
                                              std::shared_ptr<MockSource> source) {
    auto rt = runtime(b, std::move(source), {}, false);
    rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
    rt->with_replay_store(store_);
    return rt;
  }
  // Passes until one receives nothing.
  static PassSummary drain(ConnectorRuntime& rt) {
    PassSummary total;
    for (int i = 0; i < 20; ++i) {
      auto pass = rt.run_once();
      EXPECT_TRUE(pass) << pass.error().message;
      if (!pass) break;
      total.received += pass->received;
      total.acked += pass->acked;
      total.dead_lettered += pass->dead_lettered;
      total.collisions += pass->collisions;
      if (pass->received == 0) break;
    }
    return total;
  }
  double collisions() {
    return metrics_->counter(metrics::kConnectorCollisions, {{"source", "orders"}});
  }
  // The "old topic": offsets 0..n-1 of partition 0, orders old-0..old-(n-1),
  // started and committed.
  void consume_old_topic(int n, CollisionPolicy policy = CollisionPolicy::kHold) {
    auto old = std::make_shared<MockSource>("orders.placed");
    for (int i = 0; i < n; ++i) old->push_kafka(0, i, order_json(fmt::format("old-{}", i)));
    auto rt = runtime(binding(policy), old);
    drain(*rt);
    ASSERT_EQ(old->committed(0), n);
    ASSERT_EQ(executions(), n);
  }

  std::shared_ptr<connector_dlq::DeadLetterStore> store_;
  void SetUp() override {
    ConnectorTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_shared<connector_dlq::DeadLetterStore>(engine_->pool());
  }
};

// A genuine redelivery carries the same bytes: still a silent dedupe.
TEST_F(CollisionTest, a_redelivery_of_the_same_record_is_still_a_silent_dedupe) {
  auto source = std::make_shared<MockSource>("orders.placed");
  source->push_kafka(0, 0, order_json("A-1"), "key-1", {{"h", "v"}});
  auto rt = runtime(binding(), source);
  drain(*rt);
  source->push_kafka(0, 0, order_json("A-1"), "key-1", {{"h", "v"}});  // redelivered
  const auto again = drain(*rt);
  EXPECT_EQ(again.acked, 1u);
  EXPECT_EQ(again.collisions, 0u);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              {{"source", "orders"}, {"outcome", "idempotent_replay"}}),
            1);
  EXPECT_EQ(collisions(), 0);
  EXPECT_FALSE(rt->collision_hold());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE key_fingerprint IS "
                   "NOT NULL"),
            1)
      << "the start keeps the record's fingerprint beside its key";
}

// hold: the first colliding record is detected on its first delivery;
// nothing past it is committed, no new message is taken, and the report
// names the binding, the coordinates, the earlier run and the remedy. A new
// key_incarnation then starts every record of the new topic exactly once.
TEST_F(CollisionTest, hold_stops_at_a_collision_until_the_incarnation_is_rotated) {
  consume_old_topic(5);
  const std::string first_run = text(
      "SELECT id::text FROM harvest_workflow_executions WHERE start_source_ref = "
      "'orders.placed:0:0'");

  auto recreated = std::make_shared<MockSource>("orders.placed");
  for (int i = 0; i < 5; ++i) recreated->push_kafka(0, i, order_json(fmt::format("new-{}", i)));
  auto rt = runtime(binding(), recreated);
  auto pass = rt->run_once();
  ASSERT_TRUE(pass) << pass.error().message;
  EXPECT_EQ(pass->received, 5u);
  EXPECT_EQ(pass->collisions, 5u);
  EXPECT_EQ(pass->acked, 0u);
  EXPECT_EQ(recreated->committed(0), std::nullopt) << "nothing past the collision is committed";
  EXPECT_EQ(executions(), 5) << "no record of the new topic was taken for a redelivery";
  EXPECT_EQ(collisions(), 5);
  EXPECT_EQ(metrics_->gauge(metrics::kConnectorCollisionHold, {{"source", "orders"}}), 1);
  const auto hold = rt->collision_hold();
  ASSERT_TRUE(hold);
  EXPECT_NE(hold->find("binding 'orders'"), std::string::npos) << *hold;
  EXPECT_NE(hold->find("orders.placed:0:0"), std::string::npos) << *hold;
  EXPECT_NE(hold->find(first_run), std::string::npos) << *hold;
  EXPECT_NE(hold->find("key_incarnation"), std::string::npos) << *hold;
  EXPECT_EQ(rt->status().collision_hold, hold);
  EXPECT_EQ(rt->status().collisions, 5u);

  // Holding: later records stay on the broker, and no stall rebuilds the
  // consumer over the held partition.
  recreated->push_kafka(0, 5, order_json("new-5"));
  for (int i = 0; i < 3; ++i) {
    auto idle = rt->run_once();
    ASSERT_TRUE(idle) << idle.error().message;
    EXPECT_EQ(idle->received, 0u);
  }
  EXPECT_EQ(recreated->pending(), 1u);
  EXPECT_EQ(recreated->recoveries(), 0);
  rt.reset();

  // Restarted with the same incarnation: held again, on first delivery.
  ASSERT_TRUE(recreated->recover());
  auto same = runtime(binding(), recreated);
  drain(*same);
  EXPECT_TRUE(same->collision_hold());
  EXPECT_EQ(executions(), 5);
  same.reset();

  // The operator rotates the namespace and restarts: every record of the
  // new topic starts exactly once, and the prefix commits.
  ASSERT_TRUE(recreated->recover());
  auto rotated = runtime(binding(CollisionPolicy::kHold, "2026-12-recreated"), recreated);
  drain(*rotated);
  EXPECT_FALSE(rotated->collision_hold());
  EXPECT_EQ(recreated->committed(0), 6);
  EXPECT_EQ(executions(), 11);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE input->>'order_id' "
                   "LIKE 'new-%'"),
            6);
  EXPECT_EQ(scalar("SELECT count(DISTINCT start_source_ref) FROM harvest_workflow_executions "
                   "WHERE input->>'order_id' LIKE 'new-%'"),
            6);
}

// dead_letter: each colliding record is dead-lettered byte-exact, the stream
// moves on; replay is refused under the old namespace and starts each
// exactly once under a new one.
TEST_F(CollisionTest, dead_letter_keeps_each_colliding_record_and_replays_after_rotation) {
  consume_old_topic(3, CollisionPolicy::kDeadLetter);
  auto recreated = std::make_shared<MockSource>("orders.placed");
  std::vector<std::string> payloads;
  for (int i = 0; i < 3; ++i) {
    payloads.push_back(order_json(fmt::format("new-{}", i)) + std::string(" \x01\xff", 3));
    recreated->push_kafka(0, i, payloads.back(), fmt::format("k{}", i), {{"trace", "t"}});
  }
  recreated->push_kafka(0, 3, order_json("new-3"));  // past the old topic's end
  // The payloads end in bytes that are not text, to show they are kept
  // exactly; the mapper reads the JSON object in front of them.
  auto b = binding(CollisionPolicy::kDeadLetter);
  b.map_raw([](const MessageCtx& ctx, std::string_view raw) -> MapResult {
    auto json = engine::Json::parse(raw.substr(0, raw.find('}') + 1));
    return MappedMessage{
        fmt::format("order-{}@{}", json["order_id"].get<std::string>(), render(ctx.coordinates())),
        json};
  });
  auto rt = replaying(b, recreated);
  const auto done = drain(*rt);
  EXPECT_EQ(done.dead_lettered, 3u);
  EXPECT_EQ(done.acked, 1u);
  EXPECT_EQ(recreated->committed(0), 4);
  EXPECT_EQ(executions(), 4);
  EXPECT_EQ(collisions(), 3);
  EXPECT_FALSE(rt->collision_hold());
  auto rows = store_->list({});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& row : *rows) {
    EXPECT_EQ(row.reason, "coordinate_collision");
    const int offset = row.coordinates.back() - '0';
    EXPECT_EQ(row.payload, payloads.at(offset)) << "byte-exact";
    EXPECT_EQ(row.key, fmt::format("k{}", offset));
    EXPECT_NE(row.detail.find("key_incarnation"), std::string::npos) << row.detail;
  }

  // Replayed under the incarnation it collided in: refused, nothing starts.
  ASSERT_TRUE(store_->request_replay({.binding = "orders"}, "alice"));
  auto refused = rt->replay_requested();
  ASSERT_TRUE(refused) << refused.error().message;
  EXPECT_EQ(refused->dead_lettered, 3u);
  EXPECT_EQ(executions(), 4);

  // Rotated: each starts exactly once; a second replay finds the same runs.
  b.key_incarnation("2026-12-recreated");
  auto rotated = replaying(b, recreated);
  auto marked = store_->request_replay({.binding = "orders"}, "alice");
  ASSERT_TRUE(marked);
  EXPECT_EQ(marked->requested, 3u);
  auto replayed = rotated->replay_requested();
  ASSERT_TRUE(replayed) << replayed.error().message;
  EXPECT_EQ(replayed->started, 3u);
  EXPECT_EQ(executions(), 7);
  EXPECT_EQ(scalar("SELECT count(DISTINCT start_source_ref) FROM harvest_workflow_executions "
                   "WHERE input->>'order_id' LIKE 'new-%'"),
            4);
}

// dispatch: a colliding record starts under a fingerprinted key; its own
// redelivery then dedupes to that run.
TEST_F(CollisionTest, dispatch_starts_a_colliding_record_once_under_a_fingerprinted_key) {
  consume_old_topic(2, CollisionPolicy::kDispatch);
  auto recreated = std::make_shared<MockSource>("orders.placed");
  recreated->push_kafka(0, 0, order_json("new-0"));
  recreated->push_kafka(0, 1, order_json("new-1"));
  auto rt = runtime(binding(CollisionPolicy::kDispatch), recreated);
  const auto first = drain(*rt);
  EXPECT_EQ(first.acked, 2u);
  EXPECT_EQ(executions(), 4);
  EXPECT_EQ(recreated->committed(0), 2);
  EXPECT_EQ(collisions(), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE idempotency_key LIKE "
                   "'%fp:%'"),
            2);
  recreated->push_kafka(0, 1, order_json("new-1"));  // a redelivery of the new record
  drain(*rt);
  EXPECT_EQ(executions(), 4) << "the redelivery found the fingerprinted run";
  EXPECT_FALSE(rt->collision_hold());
}

// Poison at a reused position: the old topic's record there was dead-lettered
// too. The new record is another one (its fingerprint says so): it gets a row
// of its own instead of being acked as already recorded.
TEST_F(CollisionTest, poison_at_a_reused_position_gets_a_dead_letter_of_its_own) {
  auto pg = std::make_shared<PostgresDeadLetterSink>(engine_->pool());
  auto old = std::make_shared<MockSource>("orders.placed");
  old->push_kafka(0, 0, "not json");
  auto first = runtime(binding(), old, {}, false);
  first->with_dead_letter_sink(pg);
  drain(*first);
  ASSERT_EQ(old->committed(0), 1);
  auto recreated = std::make_shared<MockSource>("orders.placed");
  recreated->push_kafka(0, 0, "still not json");
  auto second = runtime(binding(), recreated, {}, false);
  second->with_dead_letter_sink(pg);
  drain(*second);
  recreated->push_kafka(0, 0, "still not json");  // its redelivery: no third row
  drain(*second);
  EXPECT_EQ(recreated->committed(0), 1);
  auto rows = store_->list({});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 2u) << "each record keeps its raw payload";
  std::set<std::string> payloads;
  for (const auto& r : *rows) payloads.insert(r.payload);
  EXPECT_EQ(payloads, (std::set<std::string>{"not json", "still not json"}));
}

// Property: over random rounds of reused positions, each a redelivery of the
// first record seen there or a different record, every message is classified
// correctly — redeliveries dedupe silently, collisions are dead-lettered,
// positions never seen start once.
TEST_F(CollisionTest, mixed_redeliveries_and_collisions_are_each_classified_correctly) {
  std::mt19937 rng(51);
  constexpr int kPositions = 40;
  std::map<int, std::string> first_seen;  // offset -> payload of the run's record
  int expected_runs = 0;
  size_t expected_letters = 0;
  std::set<std::string> collided_refs;
  for (int round = 0; round < 6; ++round) {
    auto source = std::make_shared<MockSource>("orders.placed");
    size_t redeliveries = 0;
    size_t round_collisions = 0;
    for (int offset = 0; offset < kPositions; ++offset) {
      if (rng() % 3 == 0) continue;  // this round's log is shorter here
      std::string payload;
      auto seen = first_seen.find(offset);
      if (seen != first_seen.end() && rng() % 2 == 0) {
        payload = seen->second;  // a redelivery: the same bytes
        ++redeliveries;
      } else {
        payload = order_json(fmt::format("r{}-o{}", round, offset));
        if (seen == first_seen.end()) {
          first_seen[offset] = payload;
          ++expected_runs;
        } else {
          ++round_collisions;
          collided_refs.insert(fmt::format("orders.placed:0:{}", offset));
        }
      }
      source->push_kafka(0, offset, payload);
    }
    // Offsets may have gaps; the source delivers what was pushed, in order.
    auto rt = runtime(binding(CollisionPolicy::kDeadLetter), source);
    const auto done = drain(*rt);
    expected_letters += round_collisions;
    EXPECT_EQ(done.dead_lettered, round_collisions) << "round " << round;
    EXPECT_EQ(executions(), expected_runs) << "round " << round;
    EXPECT_EQ(sink_->letters().size(), expected_letters) << "round " << round;
    EXPECT_GE(done.acked, redeliveries) << "round " << round;
  }
  std::set<std::string> lettered;
  for (const auto& l : sink_->letters()) {
    EXPECT_EQ(l.reason, "coordinate_collision");
    lettered.insert(l.coordinates);
  }
  EXPECT_EQ(lettered, collided_refs);
  EXPECT_EQ(collisions(), static_cast<double>(expected_letters));
}

// signals_with_start: a colliding signal is neither delivered twice nor
// dropped: held (not staged) until the rotation, then staged once.
TEST_F(CollisionTest, a_colliding_signal_is_neither_staged_nor_dropped) {
  auto entity = [](std::string incarnation) {
    auto b =
        SourceBinding::signals_with_start("devices", "devices.events", "device_session", "reading");
    b.map_json([](const MessageCtx&, engine::Json j) -> MapResult {
      return MappedMessage{j["device"].get<std::string>(), j};
    });
    if (!incarnation.empty()) b.key_incarnation(std::move(incarnation));
    return b;
  };
  auto reading = [](int n) { return engine::Json{{"device", "d-1"}, {"n", n}}.dump(); };
  auto old = std::make_shared<MockSource>("devices.events");
  for (int i = 0; i < 3; ++i) old->push_kafka(0, i, reading(i));
  drain(*runtime(entity(""), old));
  ASSERT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 3);

  auto recreated = std::make_shared<MockSource>("devices.events");
  for (int i = 0; i < 3; ++i) recreated->push_kafka(0, i, reading(100 + i));
  auto rt = runtime(entity(""), recreated);
  const auto held = drain(*rt);
  EXPECT_EQ(held.collisions, 3u);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 3) << "not delivered as a duplicate";
  EXPECT_EQ(recreated->committed(0), std::nullopt) << "and not acknowledged either";
  ASSERT_TRUE(rt->collision_hold());
  rt.reset();

  ASSERT_TRUE(recreated->recover());
  auto rotated = runtime(entity("2026-12-recreated"), recreated);
  drain(*rotated);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 6);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE (payload->>'n')::int >= 100"), 3);
  EXPECT_EQ(recreated->committed(0), 3);
}

// Cluster identity: the binding records the cluster it reads per key
// incarnation; another cluster is refused, naming both ids, until the
// cutover is acknowledged (or the incarnation rotated).
TEST_F(CollisionTest, a_binding_pointed_at_another_cluster_refuses_to_start) {
  auto a = std::make_shared<MockSource>("orders.placed");
  a->cluster_id("cluster-A");
  auto b = std::make_shared<MockSource>("orders.placed");
  b->cluster_id("cluster-B");
  ASSERT_TRUE(check_cluster_identity(engine_->pool(), binding(), *a));
  ASSERT_TRUE(check_cluster_identity(engine_->pool(), binding(), *a)) << "same cluster: fine";

  auto refused = check_cluster_identity(engine_->pool(), binding(), *b);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kConfig);
  EXPECT_NE(refused.error().message.find("cluster-A"), std::string::npos);
  EXPECT_NE(refused.error().message.find("cluster-B"), std::string::npos);
  EXPECT_NE(refused.error().message.find("key_incarnation"), std::string::npos);
  EXPECT_NE(refused.error().message.find("cluster_cutover"), std::string::npos);

  // A new incarnation is a fresh namespace: its own cluster.
  EXPECT_TRUE(check_cluster_identity(engine_->pool(), binding(CollisionPolicy::kHold, "v2"), *b));

  // An acknowledged cutover moves the default incarnation to B.
  auto moved = binding();
  moved.cluster_cutover("cluster-B");
  EXPECT_TRUE(check_cluster_identity(engine_->pool(), moved, *b));
  EXPECT_EQ(text("SELECT cluster_id FROM harvest_connector_clusters WHERE binding = 'orders' AND "
                 "incarnation = ''"),
            "cluster-B");
  EXPECT_FALSE(check_cluster_identity(engine_->pool(), binding(), *a)) << "A is the old one now";
  auto wrong = binding();
  wrong.cluster_cutover("cluster-C");
  EXPECT_FALSE(check_cluster_identity(engine_->pool(), wrong, *b))
      << "a cutover to a cluster the source does not read is refused";
}

}  // namespace
}  // namespace harvest::connector::testing
