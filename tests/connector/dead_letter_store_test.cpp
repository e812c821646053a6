// The connector dead letters as an operator surface on real PostgreSQL —
// list/show filters, input bounds, purge needing a filter, and the replay
// marks.
#include <gtest/gtest.h>

#include "connector_fixture.hpp"
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector::testing {
namespace {

using connector_dlq::DeadLetterFilter;
using connector_dlq::DeadLetterStore;

class DeadLetterStoreTest : public ConnectorTest {
 protected:
  void SetUp() override {
    ConnectorTest::SetUp();
    if (HasFatalFailure()) return;
    pg_sink_ = std::make_unique<PostgresDeadLetterSink>(engine_->pool());
    store_ = std::make_unique<DeadLetterStore>(engine_->pool());
  }
  // One row, failed `hours_ago` hours before now.
  void letter(const std::string& key, const std::string& binding, const std::string& stream,
              const std::string& reason, int hours_ago) {
    ASSERT_TRUE(pg_sink_->write(DeadLetter{binding, stream, stream + ":0:" + key, key, reason,
                                           "detail of " + key, 1, "{\"k\":\"" + key + "\"}"}));
    ASSERT_TRUE(
        db().exec("UPDATE harvest_connector_dead_letters SET failed_at = "
                  "now() - make_interval(hours => $2::int) WHERE idempotency_key = $1",
                  {key, std::to_string(hours_ago)}));
  }
  void seed() {
    letter("a", "orders", "orders.placed", "undecodable", 1);
    letter("b", "orders", "orders.placed", "mapping_rejected", 2);
    letter("c", "orders", "orders.placed", "start_rejected", 30);
    letter("d", "devices", "devices.seen", "undecodable", 3);
  }
  std::vector<std::string> keys(const DeadLetterFilter& f, size_t limit = 100) {
    auto rows = store_->list(f, limit);
    EXPECT_TRUE(rows) << rows.error().message;
    std::vector<std::string> out;
    if (rows) {
      for (const auto& r : *rows) out.push_back(r.idempotency_key);
    }
    return out;
  }
  long long rows() { return scalar("SELECT count(*) FROM harvest_connector_dead_letters"); }

  std::unique_ptr<PostgresDeadLetterSink> pg_sink_;
  std::unique_ptr<DeadLetterStore> store_;
};

using Keys = std::vector<std::string>;

TEST_F(DeadLetterStoreTest, list_filters_by_binding_stream_reason_and_time_newest_first) {
  seed();
  EXPECT_EQ(keys({}), (Keys{"a", "b", "d", "c"}));
  EXPECT_EQ(keys({}, 2), (Keys{"a", "b"}));
  EXPECT_EQ(keys({.binding = "orders"}), (Keys{"a", "b", "c"}));
  EXPECT_EQ(keys({.stream = "devices.seen"}), (Keys{"d"}));
  EXPECT_EQ(keys({.reason = "undecodable"}), (Keys{"a", "d"}));
  EXPECT_EQ(keys({.binding = "orders", .reason = "undecodable"}), (Keys{"a"}));
  auto at = [&](int hours_ago) {
    return text(
        "SELECT to_char((now() - make_interval(hours => $1::int)) AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
        {std::to_string(hours_ago)});
  };
  // since is inclusive, until exclusive; whole seconds are enough here.
  EXPECT_EQ(keys({.since = at(24)}), (Keys{"a", "b", "d"}));
  EXPECT_EQ(keys({.until = at(24)}), (Keys{"c"}));
  EXPECT_EQ(keys({.since = at(4), .until = at(0).substr(0, 19) + "+00:00"}), (Keys{"a", "b", "d"}));
  EXPECT_EQ(keys({.binding = "nobody"}), Keys{});
}

TEST_F(DeadLetterStoreTest, show_answers_the_row_with_its_payload_or_not_found) {
  seed();
  auto listed = store_->list({.binding = "devices"});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  auto shown = store_->show(listed->front().id);
  ASSERT_TRUE(shown) << shown.error().message;
  EXPECT_EQ(shown->binding, "devices");
  EXPECT_EQ(shown->stream, "devices.seen");
  EXPECT_EQ(shown->coordinates, "devices.seen:0:d");
  EXPECT_EQ(shown->reason, "undecodable");
  EXPECT_EQ(shown->detail, "detail of d");
  EXPECT_EQ(shown->payload, "{\"k\":\"d\"}");
  EXPECT_EQ(shown->attempts, 1);
  EXPECT_FALSE(shown->replay_requested_at);
  EXPECT_FALSE(shown->replayed_at);

  auto missing = store_->show("00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  auto bad = store_->show("not-a-uuid");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(bad.error().message.find("'id'"), std::string::npos);
}

TEST_F(DeadLetterStoreTest, every_input_is_bounded_and_a_bad_one_names_its_field) {
  seed();
  auto expect_bad = [](const auto& r, const std::string& field) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
    EXPECT_NE(r.error().message.find("'" + field + "'"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("SQLSTATE"), std::string::npos);
  };
  expect_bad(store_->list({.reason = "tired"}), "reason");
  expect_bad(store_->list({.since = "yesterday"}), "since");
  expect_bad(store_->list({.until = "2026-02-30T00:00:00Z"}), "until");
  expect_bad(store_->list({.binding = std::string(257, 'b')}), "binding");
  expect_bad(store_->list({.stream = ""}), "stream");
  expect_bad(store_->list({}, 0), "limit");
  expect_bad(store_->list({}, connector_dlq::kMaxListLimit + 1), "limit");
  expect_bad(store_->request_replay({.binding = "orders"}, ""), "requested_by");
  expect_bad(store_->request_replay({.binding = "orders"}, std::string(201, 'x')), "requested_by");
  EXPECT_TRUE(store_->list({}, connector_dlq::kMaxListLimit));
}

TEST_F(DeadLetterStoreTest, purge_refuses_without_a_filter_and_deletes_exactly_the_matches) {
  seed();
  auto refused = store_->purge({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(refused.error().message.find("explicit filter"), std::string::npos);
  EXPECT_EQ(rows(), 4);

  auto purged = store_->purge({.binding = "orders", .reason = "undecodable"});
  ASSERT_TRUE(purged) << purged.error().message;
  EXPECT_EQ(*purged, 1u);
  EXPECT_EQ(keys({}), (Keys{"b", "d", "c"}));
  auto by_stream = store_->purge({.stream = "orders.placed"});
  ASSERT_TRUE(by_stream);
  EXPECT_EQ(*by_stream, 2u);
  EXPECT_EQ(keys({}), (Keys{"d"}));
  auto none = store_->purge({.binding = "nobody"});
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(rows(), 1);
}

TEST_F(DeadLetterStoreTest, replay_request_needs_a_filter_and_marks_who_and_when_once) {
  seed();
  auto refused = store_->request_replay({}, "alice");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kBadRequest);

  auto marked = store_->request_replay({.binding = "orders"}, "alice");
  ASSERT_TRUE(marked) << marked.error().message;
  EXPECT_EQ(marked->requested, 3u);
  EXPECT_EQ(marked->already_requested, 0u);
  EXPECT_EQ(marked->already_replayed, 0u);
  // A second request changes nothing: the rows wait for their runtime, and
  // keep who asked first.
  auto again = store_->request_replay({.binding = "orders"}, "bob");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->requested, 0u);
  EXPECT_EQ(again->already_requested, 3u);
  auto rows = store_->list({.binding = "orders"});
  ASSERT_TRUE(rows);
  for (const auto& r : *rows) {
    EXPECT_EQ(r.replay_requested_by, "alice");
    EXPECT_TRUE(r.replay_requested_at);
    EXPECT_FALSE(r.replayed_at);
  }
  auto untouched = store_->list({.binding = "devices"});
  ASSERT_TRUE(untouched);
  EXPECT_FALSE(untouched->front().replay_requested_at);
  // The runtime of "orders" sees exactly its three rows.
  auto claimed = store_->claim("orders", 10);
  ASSERT_TRUE(claimed);
  EXPECT_EQ(claimed->size(), 3u);
  auto other = store_->claim("devices", 10);
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->empty());
}

// On a database whose connector migrations were never applied (an
// application without connectors), the operator surface answers a clear
// not-found naming what to run, not an internal error.
TEST_F(DeadLetterStoreTest, without_the_connector_tables_every_operation_says_what_to_run) {
  ASSERT_TRUE(db().exec("DROP TABLE harvest_connector_dead_letters"));
  auto listed = store_->list({});
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(listed.error().message.find("harvest migrate"), std::string::npos)
      << listed.error().message;
  EXPECT_EQ(listed.error().message.find("SQLSTATE"), std::string::npos);
  auto replay = store_->request_replay({.binding = "orders"}, "alice");
  ASSERT_FALSE(replay);
  EXPECT_EQ(replay.error().kind, ErrorKind::kNotFound);
  auto purged = store_->purge({.binding = "orders"});
  ASSERT_FALSE(purged);
  EXPECT_EQ(purged.error().kind, ErrorKind::kNotFound);
  auto shown = store_->show("00000000-0000-4000-8000-000000000000");
  ASSERT_FALSE(shown);
  EXPECT_EQ(shown.error().kind, ErrorKind::kNotFound);
}

}  // namespace
}  // namespace harvest::connector::testing
