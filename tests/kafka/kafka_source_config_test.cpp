// KafkaSource rules that need no broker: the canonical subscription identity
// (CON-4), the forced configuration (KAF-1) and the anchor filter (KAF-4).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <harvest/common/log.hpp>
#include <harvest/kafka/anchor_book.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka {
namespace {

// Nothing listens on port 1: proves connect does not need a broker.
constexpr const char* kNoBroker = "127.0.0.1:1";

TEST(CanonicalBootstrap, order_case_whitespace_duplicates_and_default_port_do_not_matter) {
  EXPECT_EQ(canonical_bootstrap("B:9092,a"), "a:9092,b:9092");
  EXPECT_EQ(canonical_bootstrap("a:9092, b"), "a:9092,b:9092");
  EXPECT_EQ(canonical_bootstrap(" a , A:9092,,b:9092 "), "a:9092,b:9092");
  EXPECT_EQ(canonical_bootstrap("Kafka-1.Example.COM:19092"), "kafka-1.example.com:19092");
}

TEST(CanonicalBootstrap, a_different_port_is_a_different_broker) {
  EXPECT_NE(canonical_bootstrap("a:9093"), canonical_bootstrap("a"));
}

TEST(CanonicalBootstrap, bracketed_ipv6_literals_keep_their_colons) {
  EXPECT_EQ(canonical_bootstrap("[::1]"), "[::1]:9092");
  EXPECT_EQ(canonical_bootstrap("[::1]:19092,[::1]:19092"), "[::1]:19092");
}

TEST(SubscriptionIdentity, equivalent_seed_lists_name_the_same_subscription) {
  EXPECT_EQ(subscription_identity(KafkaSourceConfig("B:9092,a", "g", "orders")),
            subscription_identity(KafkaSourceConfig("a:9092, b", "g", "orders")));
}

TEST(SubscriptionIdentity, group_and_topic_distinguish_subscriptions) {
  const auto base = subscription_identity(KafkaSourceConfig("a", "g", "orders"));
  EXPECT_NE(base, subscription_identity(KafkaSourceConfig("a", "g2", "orders")));
  EXPECT_NE(base, subscription_identity(KafkaSourceConfig("a", "g", "orders2")));
}

TEST(SubscriptionIdentity, a_property_override_of_group_or_brokers_is_what_counts) {
  const auto overridden =
      KafkaSourceConfig("a", "declared", "orders").property("group.id", "effective");
  EXPECT_EQ(subscription_identity(overridden),
            subscription_identity(KafkaSourceConfig("a", "effective", "orders")));
  const auto aliased =
      KafkaSourceConfig("x", "g", "orders").property("metadata.broker.list", "A:9092");
  EXPECT_EQ(subscription_identity(aliased),
            subscription_identity(KafkaSourceConfig("a", "g", "orders")));
}

TEST(SubscriptionIdentity, the_encoding_is_injective_across_field_boundaries) {
  EXPECT_NE(subscription_identity(KafkaSourceConfig("a", "g\",\"t", "x")),
            subscription_identity(KafkaSourceConfig("a", "g", "t\",\"x")));
}

TEST(KafkaSourceConfigTest, auto_commit_is_forced_off_and_offset_reset_left_alone) {
  const auto props = KafkaSourceConfig("a", "g", "t")
                         .property("enable.auto.commit", "true")
                         .property("enable.auto.offset.store", "true")
                         .property("fetch.min.bytes", "10")
                         .effective_properties();
  EXPECT_EQ(props.at("enable.auto.commit"), "false");
  EXPECT_EQ(props.at("enable.auto.offset.store"), "false");
  EXPECT_EQ(props.at("fetch.min.bytes"), "10");
  EXPECT_EQ(props.at("auto.offset.reset"), "earliest") << "harvest's default, not librdkafka's";
  EXPECT_EQ(props.at("session.timeout.ms"), "10000") << "a dead member is noticed within 10 s";
  EXPECT_EQ(props.at("queued.max.messages.kbytes"), "16384") << "librdkafka's prefetch, bounded";
  EXPECT_EQ(props.at("queued.min.messages"), "10000");
  EXPECT_EQ(props.at("socket.timeout.ms"), "10000") << "an unanswered request fails within 10 s";
  EXPECT_EQ(props.at("reconnect.backoff.max.ms"), "2000") << "a restarted broker is found quickly";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t").max_buffered_bytes(), size_t{32} << 20)
      << "the documented read-ahead default";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t")
                .property("queued.max.messages.kbytes", "65536")
                .effective_properties()
                .at("queued.max.messages.kbytes"),
            "65536")
      << "a default, not forced";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t")
                .property("session.timeout.ms", "45000")
                .effective_properties()
                .at("session.timeout.ms"),
            "45000")
      << "a default, not forced";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t").offset_reset(), OffsetReset::kEarliest);
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t").property("auto.offset.reset", "latest").offset_reset(),
            OffsetReset::kLatest)
      << "a default, not forced";
  EXPECT_EQ(
      KafkaSourceConfig("a", "g", "t").property("auto.offset.reset", "smallest").offset_reset(),
      OffsetReset::kEarliest);
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t")
                .property("auto.offset.reset", "earliest")
                .effective_properties()
                .at("auto.offset.reset"),
            "earliest");
}

TEST(KafkaSourceConfigTest, an_instance_id_gives_static_membership_per_topic) {
  const char* saved = std::getenv("HARVEST_INSTANCE_ID");
  const std::string before = saved ? saved : "";
  ::unsetenv("HARVEST_INSTANCE_ID");
  EXPECT_FALSE(
      KafkaSourceConfig("a", "g", "t").effective_properties().contains("group.instance.id"))
      << "no id: dynamic membership";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "orders")
                .instance_id("web-1")
                .effective_properties()
                .at("group.instance.id"),
            "web-1.orders");
  ::setenv("HARVEST_INSTANCE_ID", "pod-7", 1);
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t").effective_properties().at("group.instance.id"),
            "pod-7.t")
      << "the environment's id by default";
  EXPECT_FALSE(KafkaSourceConfig("a", "g", "t")
                   .instance_id("")
                   .effective_properties()
                   .contains("group.instance.id"))
      << "an explicit empty id opts out";
  EXPECT_EQ(KafkaSourceConfig("a", "g", "t")
                .property("group.instance.id", "mine")
                .effective_properties()
                .at("group.instance.id"),
            "mine")
      << "an explicit property wins";
  if (saved) {
    ::setenv("HARVEST_INSTANCE_ID", before.c_str(), 1);
  } else {
    ::unsetenv("HARVEST_INSTANCE_ID");
  }
}

TEST(KafkaSourceConnect, is_lazy_and_warns_about_a_forced_setting) {
  log::LogCapture capture;
  auto source = KafkaSource::connect(
      KafkaSourceConfig(kNoBroker, "g", "orders").property("enable.auto.commit", "true"));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_TRUE(capture.contains({"enable.auto.commit=true", "forced to false"}));
  EXPECT_EQ((*source)->stream(), "orders");
  EXPECT_FALSE((*source)->abandon_redelivers());
  EXPECT_EQ((*source)->dead_letter_destination(), std::nullopt);
  EXPECT_TRUE((*source)->abandon({}));
  EXPECT_EQ((*source)->subscription_identity(),
            subscription_identity(KafkaSourceConfig(kNoBroker, "g", "orders")));
}

TEST(KafkaSourceConnect, an_invalid_property_is_a_config_error_naming_it) {
  auto source = KafkaSource::connect(
      KafkaSourceConfig(kNoBroker, "g", "orders").property("no.such.property", "1"));
  ASSERT_FALSE(source);
  EXPECT_EQ(source.error().kind, ErrorKind::kConfig);
  EXPECT_NE(source.error().message.find("no.such.property"), std::string::npos)
      << source.error().message;
}

TEST(KafkaSourceConnect, an_empty_topic_or_group_is_a_config_error) {
  auto no_topic = KafkaSource::connect(KafkaSourceConfig(kNoBroker, "g", ""));
  ASSERT_FALSE(no_topic);
  EXPECT_EQ(no_topic.error().kind, ErrorKind::kConfig);
  auto no_group = KafkaSource::connect(KafkaSourceConfig(kNoBroker, "", "t"));
  ASSERT_FALSE(no_group);
  EXPECT_EQ(no_group.error().kind, ErrorKind::kConfig);
}

TEST(AnchorBookTest, the_first_read_wins_and_commits_raise_it) {
  AnchorBook book;
  EXPECT_TRUE(book.record_first_read(0, 100));
  EXPECT_FALSE(book.record_first_read(0, 50));
  EXPECT_EQ(book.anchor(0), 100);
  book.raise(0, 90);
  EXPECT_EQ(book.anchor(0), 100) << "an anchor never moves backwards";
  book.raise(0, 120);
  EXPECT_EQ(book.anchor(0), 120);
  EXPECT_EQ(book.anchor(1), std::nullopt);
}

TEST(SelectAnchorCommits, only_owned_partitions_are_committed) {
  const std::map<int32_t, int64_t> anchors{{0, 10}, {1, 20}};
  EXPECT_EQ(select_anchor_commits(anchors, {1}, {}), (std::map<int32_t, int64_t>{{1, 20}}));
}

TEST(SelectAnchorCommits, nothing_is_committed_while_the_assignment_is_empty) {
  EXPECT_TRUE(select_anchor_commits({{0, 10}, {1, 20}}, {}, {}).empty());
}

TEST(SelectAnchorCommits, an_anchor_must_strictly_raise_the_groups_commit) {
  const std::map<int32_t, int64_t> anchors{{0, 100}, {1, 20}, {2, 7}, {3, 5}};
  const std::map<int32_t, int64_t> group{{0, 5000}, {1, 20}, {2, 6}};
  EXPECT_EQ(select_anchor_commits(anchors, {0, 1, 2, 3}, group),
            (std::map<int32_t, int64_t>{{2, 7}, {3, 5}}))
      << "below (stale after revoke-and-return) and equal are skipped; above and "
         "no-commit-yet are written";
}

// Encrypted, authenticated brokers: a deployment's client properties (TLS,
// SASL) from a file.
TEST(KafkaPropertiesFile, key_value_lines_comments_and_either_separator_in_file_order) {
  auto props = detail::parse_properties(
      "# from the provider\n"
      "security.protocol=SASL_SSL\n"
      "\n"
      "  ! another comment\n"
      "sasl.mechanisms : PLAIN\r\n"
      "sasl.password= s3cr=t \n"
      "ssl.ca.location=/etc/ca.pem",
      "test");
  ASSERT_TRUE(props) << props.error().describe();
  const std::vector<std::pair<std::string, std::string>> want = {
      {"security.protocol", "SASL_SSL"},
      {"sasl.mechanisms", "PLAIN"},
      {"sasl.password", "s3cr=t"},
      {"ssl.ca.location", "/etc/ca.pem"}};
  EXPECT_EQ(*props, want);
}

TEST(KafkaPropertiesFile, a_bad_line_names_the_file_and_line_never_the_value) {
  auto bad = detail::parse_properties("a=1\nsasl.password hunter2\n", "the file 'x'");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kConfig);
  EXPECT_NE(bad.error().message.find("the file 'x': line 2"), std::string::npos)
      << bad.error().message;
  EXPECT_EQ(bad.error().describe().find("hunter2"), std::string::npos);
  EXPECT_FALSE(detail::parse_properties("=value\n", "f"));
  EXPECT_FALSE(detail::parse_properties(std::string(64 * 1024 + 1, '#'), "f"));
  std::string lines;
  for (int i = 0; i < 1001; ++i) lines += "# comment\n";
  EXPECT_FALSE(detail::parse_properties(lines, "f"));
}

TEST(KafkaPropertiesFile, connect_applies_the_file_and_refuses_a_missing_one_or_a_bad_property) {
  const std::string path = ::testing::TempDir() + "/harvest-kafka-" + std::to_string(::getpid());
  ::setenv("HARVEST_KAFKA_PROPERTIES_FILE", (path + ".missing").c_str(), 1);
  auto missing = KafkaSource::connect(KafkaSourceConfig(kNoBroker, "g", "t"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(path + ".missing"), std::string::npos);
  {
    std::ofstream out(path);
    out << "ssl.ca.location.bogus=secret-value\n";
  }
  ::setenv("HARVEST_KAFKA_PROPERTIES_FILE", path.c_str(), 1);
  auto rejected = KafkaSource::connect(KafkaSourceConfig(kNoBroker, "g", "t"));
  ::unsetenv("HARVEST_KAFKA_PROPERTIES_FILE");
  std::remove(path.c_str());
  ASSERT_FALSE(rejected) << "the file's properties reach librdkafka";
  EXPECT_EQ(rejected.error().kind, ErrorKind::kConfig);
  EXPECT_NE(rejected.error().message.find("ssl.ca.location.bogus"), std::string::npos)
      << rejected.error().message;
  EXPECT_EQ(rejected.error().describe().find("secret-value"), std::string::npos);
}

}  // namespace
}  // namespace harvest::kafka
