// Replay of connector dead letters re-enters the binding's dispatch path
// where the binding runs (MockSource, real PostgreSQL): the operator marks
// rows, the runtime maps the stored payload and starts it under the
// original dedupe key, and records who/when/outcome.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>

#include "connector_fixture.hpp"
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector::testing {
namespace {

using connector_dlq::DeadLetterStore;

class DeadLetterReplayTest : public ConnectorTest {
 protected:
  void SetUp() override {
    ConnectorTest::SetUp();
    if (HasFatalFailure()) return;
    store_ = std::make_shared<DeadLetterStore>(engine_->pool());
    source_ = std::make_shared<MockSource>("orders.placed");
  }
  // Orders from customer "new-*" are refused until `accept_` is set: the
  // cause an operator fixes (a deploy of a corrected mapper, say) before
  // replaying.
  SourceBinding binding() {
    auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
    b.map_json([accept = accept_](const MessageCtx&, Order o) -> MapResult {
      if (o.order_id.starts_with("new-") && !*accept) return std::unexpected("unknown customer");
      return MappedMessage{"order-" + o.order_id, o};
    });
    b.poison_threshold(1);
    return b;
  }
  std::unique_ptr<ConnectorRuntime> replaying_runtime(ConnectorRuntimeConfig config = {}) {
    auto rt = runtime(binding(), source_, std::move(config), false);
    rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
    rt->with_replay_store(store_);
    return rt;
  }
  connector_dlq::StoredDeadLetter only_row() {
    auto rows = store_->list({});
    EXPECT_TRUE(rows);
    EXPECT_EQ(rows->size(), 1u);
    return rows->empty() ? connector_dlq::StoredDeadLetter{} : rows->front();
  }

  std::shared_ptr<std::atomic<bool>> accept_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<DeadLetterStore> store_;
  std::shared_ptr<MockSource> source_;
};

TEST_F(DeadLetterReplayTest, a_fixed_dead_letter_replays_to_exactly_one_execution_once) {
  auto rt = replaying_runtime();
  source_->push_kafka(0, 5, order_json("new-1"));
  auto pass = rt->run_once();
  ASSERT_TRUE(pass) << pass.error().message;
  EXPECT_EQ(pass->dead_lettered, 1u);
  EXPECT_EQ(executions(), 0);
  const auto dead = only_row();
  EXPECT_EQ(dead.reason, "mapping_rejected");
  EXPECT_EQ(dead.coordinates, "orders.placed:0:5");

  // Nothing is marked: the runtime replays nothing.
  auto idle = rt->replay_requested();
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->claimed, 0u);

  accept_->store(true);
  auto marked = store_->request_replay({.binding = "orders"}, "alice");
  ASSERT_TRUE(marked);
  EXPECT_EQ(marked->requested, 1u);
  auto replayed = rt->replay_requested();
  ASSERT_TRUE(replayed) << replayed.error().message;
  EXPECT_EQ(replayed->claimed, 1u);
  EXPECT_EQ(replayed->started, 1u);
  EXPECT_EQ(executions(), 1);
  const std::string run =
      text("SELECT id::text FROM harvest_workflow_executions WHERE workflow_id = 'order-new-1'");
  // The run carries the broker provenance and the original dedupe key.
  EXPECT_EQ(text("SELECT start_source || ' ' || start_source_ref FROM harvest_workflow_executions"),
            "broker orders.placed:0:5");
  EXPECT_EQ(text("SELECT idempotency_key FROM harvest_start_idempotency"), dead.idempotency_key);

  const auto row = only_row();
  EXPECT_EQ(row.replay_requested_by, "alice");
  EXPECT_TRUE(row.replay_requested_at);
  EXPECT_TRUE(row.replayed_at);
  EXPECT_EQ(row.replay_outcome, "started");
  EXPECT_EQ(row.replay_execution_id, run);
  EXPECT_EQ(row.reason, "mapping_rejected") << "the original failure stays on record";

  // Replaying it again is a no-op success: nothing is marked, nothing runs.
  auto twice = store_->request_replay({.id = row.id}, "bob");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->requested, 0u);
  EXPECT_EQ(twice->already_replayed, 1u);
  auto nothing = rt->replay_requested();
  ASSERT_TRUE(nothing);
  EXPECT_EQ(nothing->claimed, 0u);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(only_row().replay_requested_by, "alice");
}

// A dead letter keeps the record key and headers byte for byte (the console
// shows them), and a replay hands them to the mapper again.
TEST_F(DeadLetterReplayTest, the_key_and_headers_are_kept_exactly_and_a_replay_maps_with_them) {
  auto seen = std::make_shared<std::string>();
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  b.map_json([accept = accept_, seen](const MessageCtx& ctx, Order o) -> MapResult {
    *seen = std::string(ctx.header("tenant").value_or("-")) + "/" + ctx.key().value_or("-");
    if (!*accept) return std::unexpected("unknown customer");
    return MappedMessage{"order-" + o.order_id, o};
  });
  b.poison_threshold(1);
  auto rt = runtime(b, source_, {}, false);
  rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
  rt->with_replay_store(store_);
  const std::string binary_key("k\0\xff", 3);
  const std::string binary_value("\x01\x00\xfe", 3);
  source_->push_kafka(0, 0, order_json("h-1"), binary_key,
                      {{"tenant", "acme"}, {"blob", binary_value}, {"tenant", "second"}});
  auto pass = rt->run_once();
  ASSERT_TRUE(pass) << pass.error().message;
  ASSERT_EQ(pass->dead_lettered, 1u);
  auto row = only_row();
  EXPECT_EQ(row.key, binary_key);
  using H = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(row.headers, (H{{"tenant", "acme"}, {"blob", binary_value}, {"tenant", "second"}}));

  *seen = "";
  accept_->store(true);
  ASSERT_TRUE(store_->request_replay({.id = row.id}, "alice"));
  auto replayed = rt->replay_requested();
  ASSERT_TRUE(replayed) << replayed.error().message;
  EXPECT_EQ(replayed->started, 1u);
  EXPECT_EQ(*seen, "acme/" + binary_key) << "the replay's mapper sees the stored header and key";
}

// Headers are bounded: the first kMaxStoredHeaders, while they fit in
// kMaxStoredHeaderBytes; the payload is kept whole.
TEST_F(DeadLetterReplayTest, stored_headers_are_bounded) {
  auto rt = replaying_runtime();
  MockSource::Headers many;
  for (size_t i = 0; i < kMaxStoredHeaders + 20; ++i) many.emplace_back(fmt::format("h{}", i), "v");
  source_->push_kafka(0, 0, order_json("new-many"), std::nullopt, many);
  MockSource::Headers big = {{"a", std::string(kMaxStoredHeaderBytes - 10, 'x')},
                             {"b", std::string(100, 'y')}};
  source_->push_kafka(0, 1, order_json("new-big"), std::nullopt, big);
  auto pass = rt->run_once();
  ASSERT_TRUE(pass) << pass.error().message;
  ASSERT_EQ(pass->dead_lettered, 2u);
  auto rows = store_->list({});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 2u);
  for (const auto& r : *rows) {
    EXPECT_FALSE(r.key.has_value());
    if (r.coordinates == "orders.placed:0:0") {
      EXPECT_EQ(r.headers.size(), kMaxStoredHeaders);
    } else {
      ASSERT_EQ(r.headers.size(), 1u) << "the second would pass the byte bound";
      EXPECT_EQ(r.headers[0].first, "a");
    }
  }
}

TEST_F(DeadLetterReplayTest, a_replay_that_races_another_dedupes_to_the_same_execution) {
  auto rt = replaying_runtime();
  source_->push_kafka(0, 9, order_json("new-2"));
  ASSERT_TRUE(rt->run_once());
  accept_->store(true);
  ASSERT_TRUE(store_->request_replay({.binding = "orders"}, "alice"));
  auto first = rt->replay_requested();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->started, 1u);
  // As if a second replica had claimed the row before the first recorded
  // it (or the record write had failed): the row is picked up again.
  ASSERT_TRUE(db().exec(
      "UPDATE harvest_connector_dead_letters SET replayed_at = NULL, replay_outcome = NULL"));
  auto second = rt->replay_requested();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->claimed, 1u);
  EXPECT_EQ(second->started, 0u);
  EXPECT_EQ(second->existing, 1u);
  EXPECT_EQ(executions(), 1);
  const auto row = only_row();
  EXPECT_EQ(row.replay_outcome, "existing");
  EXPECT_EQ(row.replay_execution_id,
            text("SELECT id::text FROM harvest_workflow_executions WHERE workflow_id = "
                 "'order-new-2'"));
}

TEST_F(DeadLetterReplayTest, a_replay_of_a_message_that_meanwhile_started_runs_nothing_new) {
  auto rt = replaying_runtime();
  source_->push_kafka(0, 3, order_json("new-3"));
  ASSERT_TRUE(rt->run_once());
  accept_->store(true);
  // The broker redelivers the same record (a consumer rebuilt below the
  // commit): it starts under its dedupe key before anyone replays the row.
  source_->push_kafka(0, 3, order_json("new-3"));
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(executions(), 1);
  ASSERT_TRUE(store_->request_replay({.reason = "mapping_rejected"}, "alice"));
  auto replayed = rt->replay_requested();
  ASSERT_TRUE(replayed);
  EXPECT_EQ(replayed->existing, 1u);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(only_row().replay_outcome, "existing");
}

TEST_F(DeadLetterReplayTest, a_replay_that_fails_again_records_the_new_reason_and_can_be_rearmed) {
  auto rt = replaying_runtime();
  source_->push_kafka(0, 1, order_json("new-4"));
  ASSERT_TRUE(rt->run_once());
  ASSERT_TRUE(store_->request_replay({.binding = "orders"}, "alice"));
  auto failed = rt->replay_requested();
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->dead_lettered, 1u);
  EXPECT_EQ(executions(), 0);
  auto row = only_row();
  EXPECT_EQ(row.replay_outcome, "dead_lettered");
  EXPECT_EQ(row.replay_detail, "mapping_rejected: unknown customer");
  EXPECT_FALSE(row.replay_execution_id);

  accept_->store(true);
  auto rearmed = store_->request_replay({.binding = "orders"}, "bob");
  ASSERT_TRUE(rearmed);
  EXPECT_EQ(rearmed->requested, 1u);
  auto ok = rt->replay_requested();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->started, 1u);
  EXPECT_EQ(executions(), 1);
  row = only_row();
  EXPECT_EQ(row.replay_requested_by, "bob");
  EXPECT_EQ(row.replay_outcome, "started");
  EXPECT_FALSE(row.replay_detail);
}

TEST_F(DeadLetterReplayTest, run_once_picks_marked_rows_up_at_the_replay_interval) {
  ConnectorRuntimeConfig config;
  config.replay_poll_interval = std::chrono::milliseconds(0);
  auto rt = replaying_runtime(config);
  source_->push_kafka(0, 2, order_json("new-5"));
  ASSERT_TRUE(rt->run_once());
  accept_->store(true);
  ASSERT_TRUE(store_->request_replay({.binding = "orders"}, "alice"));
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(only_row().replay_outcome, "started");
}

}  // namespace
}  // namespace harvest::connector::testing
