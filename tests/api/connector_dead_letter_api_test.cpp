// The connector dead-letter surface over HTTP: dead letters are listed
// (filters, newest first), shown with their payload, marked for replay
// (who/when, safe to ask twice) and purged (only with a filter). Bad inputs
// answer 400 naming the field and never quote the database.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "api_fixture.hpp"

namespace harvest::api {
namespace {

using testing::Json;

class ConnectorDeadLetterApiTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    if (HasFatalFailure()) return;
    serve(engine::WorkflowRegistry{});
  }
  static std::string path(const std::string& rest) {
    return std::string(kPrefix) + "/connector-dead-letters" + rest;
  }
  // A row as the connector's sink writes it, failed `minutes_ago` ago.
  std::string letter(const std::string& key, const std::string& binding, const std::string& reason,
                     int minutes_ago, const std::string& payload) {
    return text(
        "INSERT INTO harvest_connector_dead_letters (binding, stream, coordinates, "
        "idempotency_key, reason, detail, attempts, payload, failed_at) VALUES ($1, $2, $3, $4, "
        "$5, 'why ' || $4, 2, decode($6, 'hex'), now() - make_interval(mins => $7::int)) "
        "RETURNING id::text",
        {binding, binding + ".events", binding + ".events:0:" + key, "conn:1:" + key, reason,
         payload, std::to_string(minutes_ago)});
  }
  static std::string hex(const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out;
  }
  static std::vector<std::string> keys(const Json& list) {
    std::vector<std::string> out;
    for (const auto& item : list.at("items")) out.push_back(item.at("idempotency_key"));
    return out;
  }
  // A 400 naming `field`, saying nothing of the database.
  static void expect_bad(const httplib::Result& r, const std::string& field) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("'" + field + "'"), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find("SQLSTATE"), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find("harvest_connector"), std::string::npos) << r->body;
  }
  long long rows() { return scalar("SELECT count(*) FROM harvest_connector_dead_letters"); }
};

using Keys = std::vector<std::string>;

TEST_F(ConnectorDeadLetterApiTest, list_filters_newest_first_and_show_carries_the_payload) {
  letter("a", "orders", "undecodable", 1, hex("{not json"));
  const std::string b = letter("b", "orders", "mapping_rejected", 2, hex("{\"id\":1}"));
  letter("c", "devices", "undecodable", 3, hex(std::string("\xff\x00\x01", 3)));

  EXPECT_EQ(keys(body(get(path("")))), (Keys{"conn:1:a", "conn:1:b", "conn:1:c"}));
  EXPECT_EQ(keys(body(get(path("?binding=orders")))), (Keys{"conn:1:a", "conn:1:b"}));
  EXPECT_EQ(keys(body(get(path("?reason=undecodable")))), (Keys{"conn:1:a", "conn:1:c"}));
  EXPECT_EQ(keys(body(get(path("?stream=devices.events")))), (Keys{"conn:1:c"}));
  EXPECT_EQ(keys(body(get(path("?binding=orders&reason=undecodable&limit=1")))),
            (Keys{"conn:1:a"}));
  EXPECT_EQ(keys(body(get(path("?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z")))),
            Keys{});

  Json listed = body(get(path("?binding=orders&reason=mapping_rejected")));
  ASSERT_EQ(listed["items"].size(), 1u);
  const Json& item = listed["items"][0];
  EXPECT_EQ(item["id"], b);
  EXPECT_EQ(item["binding"], "orders");
  EXPECT_EQ(item["stream"], "orders.events");
  EXPECT_EQ(item["coordinates"], "orders.events:0:b");
  EXPECT_EQ(item["detail"], "why conn:1:b");
  EXPECT_EQ(item["attempts"], 2);
  EXPECT_EQ(item["payload_bytes"], 8);
  EXPECT_FALSE(item.contains("payload")) << "a listing leaves payloads out";
  EXPECT_TRUE(item["replay_requested_at"].is_null());
  EXPECT_TRUE(item["failed_at"].get<std::string>().ends_with("Z"));

  Json shown = body(get(path("/" + b)));
  EXPECT_EQ(shown["payload"], "{\"id\":1}");
  EXPECT_EQ(shown["payload_base64"], "eyJpZCI6MX0=");
  const std::string c = body(get(path("?binding=devices")))["items"][0]["id"];
  Json binary = body(get(path("/" + c)));
  EXPECT_TRUE(binary["payload"].is_null()) << "not UTF-8: only the base64 form";
  EXPECT_EQ(binary["payload_base64"], "/wAB");

  auto missing = get(path("/00000000-0000-0000-0000-000000000000"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  expect_bad(get(path("/not-a-uuid")), "id");
  expect_bad(get(path("?reason=bored")), "reason");
  expect_bad(get(path("?since=last%20week")), "since");
  expect_bad(get(path("?until=2026-13-01T00:00:00Z")), "until");
  expect_bad(get(path("?limit=1001")), "limit");
  expect_bad(get(path("?binding=" + std::string(300, 'x'))), "binding");
  expect_bad(get(path("?cursor=1")), "cursor");
}

// The list pages past any one answer, by the cursor each page names; every
// row is listed once, in order, and the last page says so.
TEST_F(ConnectorDeadLetterApiTest, the_list_pages_by_cursor_through_every_row) {
  Keys all;
  for (int i = 0; i < 7; ++i) {
    letter(fmt::format("k{}", i), "orders", "undecodable", i, hex("x"));
    all.push_back(fmt::format("conn:1:k{}", i));
  }
  Keys seen;
  std::string cursor;
  int pages = 0;
  while (true) {
    Json page = body(get(
        path("?binding=orders&limit=3" +
             (cursor.empty() ? "" : "&cursor=" + httplib::detail::encode_query_param(cursor)))));
    ++pages;
    for (const auto& k : keys(page)) seen.push_back(k);
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"].get<std::string>();
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(seen, all);
  EXPECT_EQ(pages, 3);
  // The same failure time for two rows: the id breaks the tie, none is lost.
  text("UPDATE harvest_connector_dead_letters SET failed_at = '2026-01-01T00:00:00Z' RETURNING 1");
  Json first = body(get(path("?limit=4")));
  Json rest = body(get(path("?limit=4&cursor=" + httplib::detail::encode_query_param(
                                                     first["next_cursor"].get<std::string>()))));
  Keys both = keys(first);
  for (const auto& k : keys(rest)) both.push_back(k);
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, all);
  EXPECT_TRUE(rest["next_cursor"].is_null());
  expect_bad(get(path("?cursor=12|not-a-uuid")), "cursor");
}

TEST_F(ConnectorDeadLetterApiTest, replay_marks_who_and_when_once_and_needs_a_filter) {
  const std::string a = letter("a", "orders", "mapping_rejected", 1, hex("{}"));
  letter("b", "devices", "mapping_rejected", 1, hex("{}"));

  expect_bad(post(path("/replay"), Json{{"binding", "orders"}}), "requested_by");
  auto unfiltered = post(path("/replay"), Json{{"requested_by", "alice"}});
  ASSERT_TRUE(unfiltered);
  EXPECT_EQ(unfiltered->status, 400);
  EXPECT_NE(unfiltered->body.find("explicit filter"), std::string::npos) << unfiltered->body;
  expect_bad(post(path("/replay"), Json{{"requested_by", "alice"}, {"id", "x"}}), "id");
  expect_bad(post(path("/replay"), Json{{"requested_by", 7}, {"binding", "orders"}}),
             "requested_by");

  auto marked = post(path("/replay"), Json{{"binding", "orders"}, {"requested_by", "alice"}});
  ASSERT_TRUE(marked);
  ASSERT_EQ(marked->status, 200) << marked->body;
  EXPECT_EQ(body(marked),
            (Json{{"requested", 1}, {"already_requested", 0}, {"already_replayed", 0}}));
  auto again = post(path("/replay"), Json{{"id", a}, {"requested_by", "bob"}});
  ASSERT_TRUE(again);
  EXPECT_EQ(body(again),
            (Json{{"requested", 0}, {"already_requested", 1}, {"already_replayed", 0}}));

  Json shown = body(get(path("/" + a)));
  EXPECT_EQ(shown["replay_requested_by"], "alice");
  EXPECT_TRUE(shown["replay_requested_at"].is_string());
  EXPECT_TRUE(shown["replayed_at"].is_null()) << "the binding's runtime has not run it yet";
  EXPECT_TRUE(body(get(path("?binding=devices")))["items"][0]["replay_requested_at"].is_null());

  // Once the runtime has replayed it, asking again is a no-op success.
  ASSERT_TRUE(db().exec(
      "UPDATE harvest_connector_dead_letters SET replayed_at = now(), replay_outcome = 'started' "
      "WHERE id = $1::uuid",
      {a}));
  auto done = post(path("/replay"), Json{{"id", a}, {"requested_by", "carol"}});
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
  EXPECT_EQ(body(done),
            (Json{{"requested", 0}, {"already_requested", 0}, {"already_replayed", 1}}));
  EXPECT_EQ(body(get(path("/" + a)))["replay_requested_by"], "alice");
}

TEST_F(ConnectorDeadLetterApiTest, purge_refuses_an_empty_filter_and_deletes_exactly_the_matches) {
  letter("a", "orders", "undecodable", 1, hex("x"));
  letter("b", "orders", "mapping_rejected", 2, hex("y"));
  letter("c", "devices", "undecodable", 3, hex("z"));

  for (const char* empty : {"", "{}"}) {
    auto refused = post(path("/purge"), empty);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << refused->body;
    EXPECT_NE(refused->body.find("explicit filter"), std::string::npos) << refused->body;
  }
  expect_bad(post(path("/purge"), Json{{"reason", "all"}}), "reason");
  EXPECT_EQ(rows(), 3);

  auto purged = post(path("/purge"), Json{{"binding", "orders"}, {"reason", "undecodable"}});
  ASSERT_TRUE(purged);
  ASSERT_EQ(purged->status, 200) << purged->body;
  EXPECT_EQ(body(purged), (Json{{"purged", 1}}));
  EXPECT_EQ(keys(body(get(path("")))), (Keys{"conn:1:b", "conn:1:c"}));
  EXPECT_EQ(body(post(path("/purge"), Json{{"reason", "undecodable"}})), (Json{{"purged", 1}}));
  EXPECT_EQ(keys(body(get(path("")))), (Keys{"conn:1:b"}));
}

}  // namespace
}  // namespace harvest::api
