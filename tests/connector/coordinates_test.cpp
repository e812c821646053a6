// Broker coordinates have one home (connector/coordinates.hpp). Rendering
// and its exact inverse, the structured form dead letters store, the
// position query, and the dedupe key bytes — pinned against keys derived
// before the move, so no deployed key changes.
#include <gtest/gtest.h>

#include <limits>

#include <harvest/connector/coordinates.hpp>
#include <harvest/connector/dedupe_key.hpp>

namespace harvest::connector {
namespace {

bool same(const Coordinates& a, const Coordinates& b) {
  if (a.index() != b.index()) return false;
  if (const auto* k = std::get_if<KafkaCoordinates>(&a)) {
    return *k == std::get<KafkaCoordinates>(b);
  }
  const auto& x = std::get<SqsCoordinates>(a);
  const auto& y = std::get<SqsCoordinates>(b);
  return x.queue_url == y.queue_url && x.message_id == y.message_id;
}

const std::vector<Coordinates>& samples() {
  static const std::vector<Coordinates> all{
      KafkaCoordinates{"orders.placed", 3, 42},
      KafkaCoordinates{"t", 0, 0},
      KafkaCoordinates{"a.b-c_d", 2147483647, 9223372036854775807},
      SqsCoordinates{"https://sqs.us-east-1.amazonaws.com/123456789012/device-telemetry",
                     "5fea7756-0ea4-451a-a703-a558b933e274", "receipt"},
      SqsCoordinates{"mock://device-telemetry", "m-1", ""},
      SqsCoordinates{"http://127.0.0.1:9324/000000000000/q#frag", "id-2", ""},
  };
  return all;
}

TEST(Coordinates, render_and_parse_rendered_are_exact_inverses) {
  for (const auto& c : samples()) {
    const std::string text = render(c);
    auto back = parse_rendered(text);
    ASSERT_TRUE(back) << text << ": " << back.error().message;
    EXPECT_TRUE(same(*back, c)) << text;
    EXPECT_EQ(render(*back), text);
  }
  EXPECT_EQ(render(samples()[0]), "orders.placed:3:42");
  EXPECT_EQ(render(samples()[4]), "mock://device-telemetry#m-1");
}

TEST(Coordinates, unreadable_rendered_forms_are_refused_naming_the_form) {
  for (std::string_view bad :
       {"", "orders", "orders:3", ":3:4", "orders:x:4", "orders:3:4x", "orders:99999999999:1",
        "orders:1:99999999999999999999", "orders:-1:5", "#id", "queue#"}) {
    auto r = parse_rendered(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest) << bad;
    EXPECT_NE(r.error().message.find("coordinates"), std::string::npos) << r.error().message;
  }
}

TEST(Coordinates, the_structured_form_round_trips_and_refuses_what_it_cannot_read) {
  for (const auto& c : samples()) {
    auto back = coordinates_from_json(coordinates_json(c));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_TRUE(same(*back, c)) << render(c);
  }
  EXPECT_EQ(
      coordinates_json(samples()[0]),
      (Json{{"kind", "kafka"}, {"topic", "orders.placed"}, {"partition", 3}, {"offset", 42}}));
  for (const Json& bad :
       {Json(nullptr), Json("orders:1:2"), Json{{"kind", "nats"}},
        Json{{"kind", "kafka"}, {"topic", "t"}, {"partition", "1"}, {"offset", 2}},
        Json{{"kind", "kafka"}, {"topic", "t"}, {"partition", -1}, {"offset", 2}},
        Json{{"kind", "sqs"}, {"queue_url", "q"}},
        Json{{"kind", "kafka"},
             {"topic", "t"},
             {"partition", 1},
             {"offset", std::numeric_limits<uint64_t>::max()}}}) {
    auto r = coordinates_from_json(bad);
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
  }
}

TEST(Coordinates, only_a_log_position_is_tracked_for_prefix_commits) {
  auto p = position_of(KafkaCoordinates{"orders", 3, 42});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->partition, (PartitionKey{"orders", 3}));
  EXPECT_EQ(p->offset, 42);
  EXPECT_EQ(p->partition.label(), "orders[3]");
  EXPECT_FALSE(position_of(SqsCoordinates{"q", "id", "r"}));
  auto moved = at_offset(KafkaCoordinates{"orders", 3, 42}, 7);
  EXPECT_EQ(std::get<KafkaCoordinates>(moved).offset, 7);
  auto sqs = at_offset(SqsCoordinates{"q", "id", "r"}, 7);
  EXPECT_EQ(std::get<SqsCoordinates>(sqs).message_id, "id");
}

// Keys as derived before coordinates moved here (computed independently from
// the documented encoding: "conn:1:" + <len>:<bytes> per component, or
// "conn:h:" + sha256 of that when over 200 bytes). A change here changes
// every deployed dedupe key: redelivered messages would start second runs.
TEST(Coordinates, dedupe_keys_are_byte_identical_to_the_deployed_ones) {
  struct Row {
    std::string binding;
    std::string incarnation;
    Coordinates at;
    std::string key;
  };
  const std::vector<Row> table{
      {"orders", "", KafkaCoordinates{"orders.placed", 3, 42},
       "conn:1:6:orders0:5:kafka13:orders.placed1:32:42"},
      {"orders", "", KafkaCoordinates{"t", 0, -1}, "conn:1:6:orders0:5:kafka1:t1:02:-1"},
      {"telemetry", "v2",
       SqsCoordinates{"https://sqs.us-east-1.amazonaws.com/123456789012/device-telemetry",
                      "5fea7756-0ea4-451a-a703-a558b933e274", "any receipt"},
       "conn:1:9:telemetry2:v23:sqs65:https://sqs.us-east-1.amazonaws.com/123456789012/"
       "device-telemetry36:5fea7756-0ea4-451a-a703-a558b933e274"},
      {std::string(300, 'b'), "",
       KafkaCoordinates{"orders.placed", 2147483647, 9223372036854775807},
       "conn:h:d6a030056539145a0deb28b64e3e3bd72c8ad057b550cbe2bc4c8f4f5cdad690"},
  };
  for (const auto& row : table) {
    EXPECT_EQ(DedupeKey::derive(row.binding, row.incarnation, row.at).value(), row.key)
        << render(row.at);
  }
}

}  // namespace
}  // namespace harvest::connector
