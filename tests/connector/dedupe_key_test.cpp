// CON-8: dedupe keys are namespaced, incarnation-scoped, bounded and injective.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/fingerprint.hpp>

namespace harvest::connector {
namespace {

Coordinates kafka(std::string topic, int32_t p, int64_t o) {
  return KafkaCoordinates{std::move(topic), p, o};
}

TEST(DedupeKey, carries_the_reserved_prefix) {
  auto k = DedupeKey::derive("orders", "", kafka("orders.placed", 0, 41));
  EXPECT_TRUE(k.value().starts_with("conn:"));
}

TEST(DedupeKey, two_bindings_on_one_stream_never_alias) {
  auto a = DedupeKey::derive("orders", "", kafka("orders.placed", 0, 41));
  auto b = DedupeKey::derive("orders-audit", "", kafka("orders.placed", 0, 41));
  EXPECT_NE(a.value(), b.value());
}

TEST(DedupeKey, incarnation_changes_the_key) {
  auto a = DedupeKey::derive("orders", "", kafka("orders", 0, 41));
  auto b = DedupeKey::derive("orders", "2026-08-cutover", kafka("orders", 0, 41));
  EXPECT_NE(a.value(), b.value());
}

TEST(DedupeKey, sqs_keys_use_queue_and_message_id_only) {
  auto a = DedupeKey::derive("t", "", SqsCoordinates{"http://q/1/a", "m-1", "receipt-1"});
  auto b = DedupeKey::derive("t", "", SqsCoordinates{"http://q/1/a", "m-1", "receipt-2"});
  auto c = DedupeKey::derive("t", "", SqsCoordinates{"http://q/1/a", "m-2", "receipt-1"});
  EXPECT_EQ(a.value(), b.value()) << "a second receive of one message is the same message";
  EXPECT_NE(a.value(), c.value());
}

TEST(DedupeKey, is_bounded_for_pathological_coordinates) {
  auto k = DedupeKey::derive(std::string(5000, 'b'), std::string(300, 'i'),
                             kafka(std::string(10000, 't'), 7, 1234567890123));
  EXPECT_LE(k.value().size(), 7 + DedupeKey::kMaxInline);
  EXPECT_TRUE(k.value().starts_with("conn:h:"));
}

TEST(DedupeKey, separators_and_empty_parts_cannot_collide) {
  // Naive "binding:incarnation:topic" joining would make all of these equal.
  auto a = DedupeKey::derive("a:b", "", kafka("c", 0, 1));
  auto b = DedupeKey::derive("a", "b", kafka("c", 0, 1));
  auto c = DedupeKey::derive("a", "", kafka("b:c", 0, 1));
  auto d = DedupeKey::derive("", "a:b", kafka("c", 0, 1));
  std::set<std::string> keys{a.value(), b.value(), c.value(), d.value()};
  EXPECT_EQ(keys.size(), 4u);
}

TEST(DedupeKey, property_distinct_random_coordinates_never_collide) {
  std::mt19937_64 rng(20261202);
  const std::string alphabet = "ab:1#/\\|0 ";  // separators on purpose
  auto random_string = [&](size_t max_len) {
    std::uniform_int_distribution<size_t> len(0, max_len);
    std::string s(len(rng), ' ');
    for (auto& ch : s) ch = alphabet[rng() % alphabet.size()];
    if (rng() % 50 == 0) s = std::string(300 + rng() % 500, alphabet[rng() % alphabet.size()]);
    return s;
  };
  std::map<std::string, std::string> seen;  // key -> canonical description of the input
  for (int i = 0; i < 60000; ++i) {
    std::string binding = random_string(6), inc = random_string(3);
    Coordinates c;
    std::string desc;
    if (rng() % 2) {
      auto topic = random_string(6);
      int32_t p = static_cast<int32_t>(rng() % 4);
      int64_t o = static_cast<int64_t>(rng() % 50);
      c = kafka(topic, p, o);
      desc = "k|" + std::to_string(binding.size()) + binding + "|" + std::to_string(inc.size()) +
             inc + "|" + std::to_string(topic.size()) + topic + "|" + std::to_string(p) + "|" +
             std::to_string(o);
    } else {
      auto q = random_string(6), id = random_string(6);
      c = SqsCoordinates{q, id, random_string(4)};
      desc = "s|" + std::to_string(binding.size()) + binding + "|" + std::to_string(inc.size()) +
             inc + "|" + std::to_string(q.size()) + q + "|" + std::to_string(id.size()) + id;
    }
    auto key = DedupeKey::derive(binding, inc, c).value();
    ASSERT_LE(key.size(), 7 + DedupeKey::kMaxInline);
    auto [it, fresh] = seen.emplace(key, desc);
    if (!fresh) {
      ASSERT_EQ(it->second, desc) << "collision between distinct inputs: " << key;
    }
  }
  EXPECT_GT(seen.size(), 30000u);
}

// Coordinate collisions: a record's fingerprint covers its key, value,
// headers and timestamp; a byte-identical record (a redelivery) has the
// same one.
TEST(RecordFingerprint, changes_with_every_part_of_the_record_and_only_then) {
  Message m{.coordinates = kafka("orders", 0, 7),
            .key = std::string("k"),
            .headers = {{"h", "v"}},
            .payload = "{\"order_id\":\"A-1\"}",
            .timestamp_ms = 1765000000000};
  const auto fp = record_fingerprint(m);
  ASSERT_TRUE(fp);
  EXPECT_EQ(record_fingerprint(m), fp) << "deterministic";
  Message moved = m;
  moved.coordinates = kafka("orders", 3, 99);
  moved.receive_count = 4;
  moved.generation = 9;
  EXPECT_EQ(record_fingerprint(moved), fp)
      << "where it sits and how often it came are not the record";
  auto differs = [&](auto change) {
    Message other = m;
    change(other);
    return record_fingerprint(other) != fp;
  };
  EXPECT_TRUE(differs([](Message& o) { o.payload += " "; }));
  EXPECT_TRUE(differs([](Message& o) { o.key = std::string("K"); }));
  EXPECT_TRUE(differs([](Message& o) { o.key = std::nullopt; }));
  EXPECT_TRUE(differs([](Message& o) { o.key = std::string(); })) << "an empty key is a key";
  EXPECT_TRUE(differs([](Message& o) { o.headers.clear(); }));
  EXPECT_TRUE(differs([](Message& o) { o.headers[0].second = "w"; }));
  EXPECT_TRUE(differs([](Message& o) { o.headers = {{"hv", ""}}; })) << "lengths are prefixed";
  EXPECT_TRUE(differs([](Message& o) { o.timestamp_ms = 1765000000001; }));
  EXPECT_TRUE(differs([](Message& o) { o.timestamp_ms = std::nullopt; }));
}

TEST(RecordFingerprint, an_sqs_message_has_none_its_message_id_never_repeats) {
  Message m{.coordinates = SqsCoordinates{"https://sqs/q", "id-1", "rh"}, .payload = "x"};
  EXPECT_EQ(record_fingerprint(m), std::nullopt);
}

TEST(DedupeKey, a_fingerprinted_key_is_never_a_coordinate_key) {
  const auto c = kafka("orders", 0, 7);
  const auto plain = DedupeKey::derive("b", "", c).value();
  const auto a = DedupeKey::derive_fingerprinted("b", "", c, 1).value();
  EXPECT_NE(a, plain);
  EXPECT_NE(a, DedupeKey::derive_fingerprinted("b", "", c, 2).value());
  EXPECT_EQ(a, DedupeKey::derive_fingerprinted("b", "", c, 1).value());
  EXPECT_TRUE(a.starts_with("conn:"));
}

}  // namespace
}  // namespace harvest::connector
