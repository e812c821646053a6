// KafkaSource against a real Apache Kafka broker (KAF-1..KAF-6, CON-6).
#include <gtest/gtest.h>

#include "kafka_fixture.hpp"
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>

namespace harvest::kafka::testing {
namespace {

TEST_F(KafkaSourceTest, receive_returns_records_with_exact_coordinates_key_headers_and_payload) {
  const auto topic = make_topic(2);
  const std::string binary("a\0b\xff", 4);
  const int64_t first = produce(topic, Record{.partition = 0,
                                              .key = "order-1",
                                              .payload = R"({"id":1})",
                                              .headers = {{"trace", "t-1"}, {"empty", ""}}});
  const int64_t second = produce(topic, Record{.partition = 1, .payload = binary});
  const int64_t third = produce(topic, Record{.partition = 0, .key = "", .payload = ""});

  auto source = connect(config(unique_name("g"), topic));
  ASSERT_TRUE(source);
  EXPECT_EQ(source->stream(), topic);
  EXPECT_FALSE(source->abandon_redelivers());
  EXPECT_EQ(source->dead_letter_destination(), std::nullopt);

  auto got = receive_n(*source, 3);
  ASSERT_EQ(got.size(), 3u);
  std::map<std::pair<int32_t, int64_t>, Message> by_coordinates;
  for (auto& m : got) {
    EXPECT_EQ(coords(m).topic, topic);
    EXPECT_EQ(m.receive_count, 1);
    by_coordinates.emplace(std::pair{coords(m).partition, coords(m).offset}, std::move(m));
  }
  ASSERT_TRUE(by_coordinates.contains({0, first}));
  ASSERT_TRUE(by_coordinates.contains({1, second}));
  ASSERT_TRUE(by_coordinates.contains({0, third}));

  const auto& a = by_coordinates.at({0, first});
  EXPECT_EQ(a.key, std::optional<std::string>("order-1"));
  EXPECT_EQ(a.payload, R"({"id":1})");
  EXPECT_EQ(a.headers,
            (std::vector<std::pair<std::string, std::string>>{{"trace", "t-1"}, {"empty", ""}}));
  const auto& b = by_coordinates.at({1, second});
  EXPECT_EQ(b.key, std::nullopt) << "a record without a key has no key";
  EXPECT_EQ(b.payload, binary) << "the body is passed byte for byte";
  EXPECT_TRUE(b.headers.empty());
  const auto& c = by_coordinates.at({0, third});
  EXPECT_EQ(c.key, std::optional<std::string>("")) << "an empty key is still a key";
  EXPECT_EQ(c.payload, "");
}

TEST_F(KafkaSourceTest, ack_commits_the_offset_after_the_acked_message) {
  const auto topic = make_topic(1);
  for (int i = 0; i < 5; ++i) produce(topic, 0, "m" + std::to_string(i));
  const auto group = unique_name("g");
  auto source = connect(config(group, topic));
  auto got = receive_n(*source, 5);
  ASSERT_EQ(got.size(), 5u);

  ASSERT_TRUE(source->ack({got[2]}));
  EXPECT_EQ(await_committed(group, topic, {{0, 3}}), (std::map<int32_t, int64_t>{{0, 3}}));
  // Several messages of one partition: the highest one counts.
  ASSERT_TRUE(source->ack({got[4], got[3]}));
  EXPECT_EQ(await_committed(group, topic, {{0, 5}}), (std::map<int32_t, int64_t>{{0, 5}}));
}

TEST_F(KafkaSourceTest, ack_with_a_generation_that_is_not_current_is_dropped) {
  const auto topic = make_topic(2);
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 3; ++i) produce(topic, p, "m");
  }
  const auto group = unique_name("g");
  auto source = connect(config(group, topic));
  auto got = receive_n(*source, 6);
  ASSERT_EQ(got.size(), 6u);
  std::optional<Message> p0;
  std::optional<Message> p1;
  for (const auto& m : got) {
    if (coords(m).partition == 0 && coords(m).offset == 2) p0 = m;
    if (coords(m).partition == 1 && coords(m).offset == 0) p1 = m;
  }
  ASSERT_TRUE(p0 && p1);

  Message stale = *p0;
  stale.generation -= 1;  // as if read under an earlier assignment
  ASSERT_TRUE(source->ack({stale}));
  // A valid ack on the other partition is committed after the dropped one
  // would have been (commits go out in order): once it is visible, partition
  // 0 would be too.
  ASSERT_TRUE(source->ack({*p1}));
  EXPECT_EQ(await_committed(group, topic, {{1, 1}}), (std::map<int32_t, int64_t>{{1, 1}}))
      << "partition 0 must not be committed from a stale generation";
}

// Two replicas in one group; a rebalance moves a partition from A to B.
// A's late ack for the moved partition must not reach the broker, while its
// ack for a partition it still owns does. Runs with an eager and a
// cooperative assignor.
class KafkaRebalanceTest : public KafkaSourceTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(KafkaRebalanceTest, ack_for_a_partition_moved_to_another_replica_is_dropped) {
  const auto topic = make_topic(2);
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 3; ++i) produce(topic, p, "m");
  }
  const auto group = unique_name("g");
  auto cfg = config(group, topic).property("partition.assignment.strategy", GetParam());
  auto a = connect(cfg);
  auto first = receive_n(*a, 6);
  ASSERT_EQ(first.size(), 6u);
  ASSERT_EQ(a->snapshot().owned.size(), 2u);

  auto b = connect(cfg);
  ASSERT_TRUE(b->receive(1, 100ms)) << "the first receive joins the group";
  ASSERT_TRUE(eventually(
      [&] { return a->snapshot().owned.size() == 1 && b->snapshot().owned.size() == 1; }, 60s))
      << "the rebalance did not split the partitions";
  const int32_t kept = a->snapshot().owned.begin()->first;
  const int32_t moved = 1 - kept;
  ASSERT_EQ(b->snapshot().owned.begin()->first, moved);

  const int64_t fresh_offset = produce(topic, kept, "after the rebalance");
  auto fresh = receive_at(*a, kept, fresh_offset);
  ASSERT_TRUE(fresh) << "A did not receive the new record on the partition it kept";
  std::optional<Message> late;
  for (const auto& m : first) {
    if (coords(m).partition == moved && coords(m).offset == 2) late = m;
  }
  ASSERT_TRUE(late);

  // One ack, one commit request: the kept partition's commit becoming
  // visible means the moved partition's would have been visible too.
  ASSERT_TRUE(a->ack({*late, *fresh}));
  EXPECT_EQ(await_committed(group, topic, {{kept, fresh_offset + 1}}),
            (std::map<int32_t, int64_t>{{kept, fresh_offset + 1}}));

  // Leaving commits each replica's acked prefix; B acked nothing.
  b.reset();
  a.reset();
  EXPECT_EQ(committed(group, topic), (std::map<int32_t, int64_t>{{kept, fresh_offset + 1}}));
}

INSTANTIATE_TEST_SUITE_P(Assignors, KafkaRebalanceTest,
                         ::testing::Values("range", "cooperative-sticky"), [](const auto& info) {
                           return std::string(info.param) == "range" ? "eager" : "cooperative";
                         });

// The runtime calls receive only between batches. While a batch dispatches
// slowly the source keeps polling librdkafka: the read-ahead stops at
// max_buffered (partitions paused), the member stays in the group past
// max.poll.interval.ms, and pausing/resuming loses or repeats nothing.
TEST_F(KafkaSourceTest, slow_dispatch_neither_overflows_the_buffer_nor_expires_the_poll_interval) {
  const auto topic = make_topic(1);
  constexpr int kRecords = 30;
  for (int i = 0; i < kRecords; ++i) produce(topic, 0, "m" + std::to_string(i));
  const auto group = unique_name("g");
  // librdkafka requires max.poll.interval.ms >= session.timeout.ms; 6 s is
  // the broker's minimum session timeout.
  auto source =
      connect(config(group, topic).max_buffered(4).property("max.poll.interval.ms", "6000"));
  auto first = receive_n(*source, 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(coords(first[0]).offset, 0);
  const uint64_t generation = first[0].generation;

  // The first receive may have raced the read-ahead, so the buffer holds 3
  // or 4 once fetching is paused (it resumes only at half).
  ASSERT_TRUE(eventually([&] { return source->snapshot().paused; }))
      << "fetching was not paused at max_buffered";
  const size_t buffered = source->snapshot().buffered;
  EXPECT_LE(buffered, 4u);

  // A dispatch that outlasts max.poll.interval.ms. This wait is the slow
  // batch under test (time must pass), not a synchronisation.
  std::this_thread::sleep_for(7500ms);
  const auto during = source->snapshot();
  EXPECT_EQ(during.owned, (std::map<int32_t, uint64_t>{{0, generation}}))
      << "the member left the group (or was rebalanced) while dispatch was slow";
  EXPECT_EQ(during.buffered, buffered) << "the read-ahead grew while paused";
  EXPECT_TRUE(during.paused);

  ASSERT_TRUE(source->ack(first));
  EXPECT_EQ(await_committed(group, topic, {{0, 1}}), (std::map<int32_t, int64_t>{{0, 1}}))
      << "the ack of a message read before the slow batch was dropped";

  auto rest = receive_n(*source, kRecords - 1);
  std::vector<int64_t> offsets;
  for (const auto& m : rest) offsets.push_back(coords(m).offset);
  std::vector<int64_t> expected;
  for (int i = 1; i < kRecords; ++i) expected.push_back(i);
  EXPECT_EQ(offsets, expected) << "pause/resume lost or repeated records";
}

// The read-ahead is bounded in bytes as well as in messages, and a full
// read-ahead first holds consumption (librdkafka keeps its prefetch), pausing
// only when it stays full; either way nothing is lost or repeated.
TEST_F(KafkaSourceTest, read_ahead_is_bounded_in_bytes_and_a_short_hold_loses_nothing) {
  const auto topic = make_topic(1);
  constexpr int kRecords = 40;
  const std::string pad(10'000, 'x');
  for (int i = 0; i < kRecords; ++i) produce(topic, 0, std::to_string(i) + pad);
  const auto group = unique_name("g");
  auto source = connect(config(group, topic).max_buffered_bytes(35'000));
  auto first = receive_n(*source, 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(eventually([&] { return source->snapshot().paused; }))
      << "a read-ahead full in bytes must end in a pause when nobody receives";
  EXPECT_LE(source->snapshot().buffered, 4u) << "35,000 bytes hold at most 4 records of 10 KB";

  // Drain it promptly: each receive makes room within the hold, so the rest
  // arrives in order, once each.
  auto rest = receive_n(*source, kRecords - 1);
  std::vector<int64_t> offsets;
  for (const auto& m : rest) offsets.push_back(coords(m).offset);
  std::vector<int64_t> expected;
  for (int i = 1; i < kRecords; ++i) expected.push_back(i);
  EXPECT_EQ(offsets, expected) << "the bounded read-ahead lost or repeated records";
}

TEST_F(KafkaSourceTest, abandon_is_a_no_op) {
  const auto topic = make_topic(1);
  for (int i = 0; i < 3; ++i) produce(topic, 0, "m");
  const auto group = unique_name("g");
  auto source = connect(config(group, topic));
  auto got = receive_n(*source, 3);
  ASSERT_EQ(got.size(), 3u);

  ASSERT_TRUE(source->abandon(got));
  auto again = source->receive(10, 1s);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_TRUE(again->empty()) << "Kafka has no hand-back: abandon must not redeliver";
  EXPECT_TRUE(committed(group, topic).empty()) << "abandon must not commit";
}

TEST_F(KafkaSourceTest, recover_rebuilds_the_consumer_from_the_last_ack) {
  const auto topic = make_topic(1);
  for (int i = 0; i < 5; ++i) produce(topic, 0, "m" + std::to_string(i));
  const auto group = unique_name("g");
  auto source = connect(config(group, topic));
  auto got = receive_n(*source, 5);
  ASSERT_EQ(got.size(), 5u);

  // Recover straight after the (asynchronous) ack: the anchor commit makes
  // it durable before the rebuild, so the rebuilt consumer cannot start
  // from an older position.
  ASSERT_TRUE(source->ack({got[1]}));
  auto recovered = source->recover();
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_TRUE(*recovered);
  EXPECT_EQ(committed(group, topic), (std::map<int32_t, int64_t>{{0, 2}}))
      << "recover commits synchronously before rebuilding";

  auto redelivered = receive_n(*source, 3);
  std::vector<int64_t> offsets;
  for (const auto& m : redelivered) offsets.push_back(coords(m).offset);
  EXPECT_EQ(offsets, (std::vector<int64_t>{2, 3, 4}));
  auto nothing_more = source->receive(10, 500ms);
  ASSERT_TRUE(nothing_more);
  EXPECT_TRUE(nothing_more->empty());
}

// KAF-4: a new group under `latest` whose first record is never settled.
TEST_F(KafkaSourceTest, latest_group_is_anchored_so_recovery_and_restart_do_not_skip) {
  const auto topic = make_topic(1);
  for (int i = 0; i < 3; ++i) produce(topic, 0, "before the group existed");
  const auto group = unique_name("g");
  // enable.partition.eof makes the resolved start observable before any
  // record arrives (the EOF event is the first read).
  auto cfg = config(group, topic, "latest").property("enable.partition.eof", "true");
  auto source = connect(cfg);

  // The floor is committed eagerly, before any ack.
  std::map<int32_t, int64_t> floor;
  ASSERT_TRUE(eventually([&] {
    auto batch = source->receive(10, 200ms);
    EXPECT_TRUE(batch && batch->empty());
    return (floor = committed(group, topic)) == std::map<int32_t, int64_t>{{0, 3}};
  })) << "committed: "
      << (floor.empty() ? -1 : floor.begin()->second);

  EXPECT_EQ(produce(topic, 0, "first"), 3);
  EXPECT_EQ(produce(topic, 0, "second"), 4);
  auto head = receive_n(*source, 1);
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(coords(head[0]).offset, 3);

  // Its dispatch keeps failing: never acked. The rebuild must come back to
  // it rather than re-resolve `latest` past it.
  auto recovered = source->recover();
  ASSERT_TRUE(recovered) << recovered.error().message;
  auto again = receive_n(*source, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(coords(again[0]).offset, 3) << "recover skipped the unsettled head";
  EXPECT_EQ(committed(group, topic), (std::map<int32_t, int64_t>{{0, 3}}));

  // A replacement process (no anchors, no acks) starts at the floor too.
  source.reset();
  auto replacement = connect(cfg);
  auto redelivered = receive_n(*replacement, 1);
  ASSERT_EQ(redelivered.size(), 1u);
  EXPECT_EQ(coords(redelivered[0]).offset, 3);
}

// KAF-4: a failed eager floor commit is logged, retried on the next receive,
// and the batch it rode on is still returned (the floor only protects a
// later rebuild; holding records back for it would stall intake).
TEST_F(KafkaSourceTest, a_failed_floor_commit_is_logged_retried_and_the_batch_still_returned) {
  const auto topic = make_topic(1);
  produce(topic, 0, "before the group existed");
  const auto group = unique_name("g");
  auto source = connect(config(group, topic, "latest").property("enable.partition.eof", "true"));
  log::LogCapture capture;
  // Every floor commit fails (the point is re-armed before each receive)
  // until `latest` has resolved and a record has come back.
  auto failing_receive = [&] {
    fault::arm("kafka.floor_commit", fault::Action::kThrow);
    return source->receive(10, 200ms);
  };
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(failing_receive());
    return source->snapshot().anchors.contains(0);
  }));
  EXPECT_EQ(produce(topic, 0, "after"), 1);
  std::vector<Message> got;
  ASSERT_TRUE(eventually([&] {
    auto batch = failing_receive();
    EXPECT_TRUE(batch);
    if (batch) got.insert(got.end(), batch->begin(), batch->end());
    return !got.empty();
  }));
  EXPECT_EQ(coords(got[0]).offset, 1) << "a failed floor commit must not hold the batch back";
  EXPECT_TRUE(committed(group, topic).empty());
  EXPECT_GE(fault::fired("kafka.floor_commit"), 2);
  EXPECT_TRUE(capture.contains(
      {"eager commit of the latest floor", "failed", "retrying on the next receive"}));
  // Unarmed, the next receive retries it: the floor reaches the broker.
  fault::disarm_all();
  std::map<int32_t, int64_t> floor;
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(source->receive(10, 200ms));
    return (floor = committed(group, topic)) == std::map<int32_t, int64_t>{{0, 1}};
  })) << (floor.empty() ? -1 : floor.begin()->second);
}

// KAF-3/KAF-4: with no group commit, the lag baseline is this process's
// anchor (where `latest` resolved), not the log end (a false all-clear) nor
// the log start (work from before the group existed).
TEST_F(KafkaSourceTest, lag_without_a_group_commit_counts_from_the_latest_anchor) {
  const auto topic = make_topic(1);
  for (int i = 0; i < 5; ++i) produce(topic, 0, "before the group existed");
  const auto group = unique_name("g");
  auto source = connect(config(group, topic, "latest").property("enable.partition.eof", "true"));
  // Keep the floor from reaching the broker: the anchor is all there is.
  ASSERT_TRUE(eventually([&] {
    fault::arm("kafka.floor_commit", fault::Action::kThrow);
    EXPECT_TRUE(source->receive(10, 200ms));
    return source->snapshot().anchors.contains(0);
  }));
  fault::disarm_all();
  ASSERT_TRUE(committed(group, topic).empty()) << "the group must have no commit for this case";
  for (int i = 0; i < 3; ++i) produce(topic, 0, "owed");
  auto lag = source->lag(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(lag) << lag.error().message;
  ASSERT_TRUE(*lag);
  EXPECT_EQ(**lag, 3) << "end 8 minus the anchor 5";
}

// KAF-3, KAF-4: the lag baseline deliberately does not apply the ownership
// filter the anchor commits use. A replica keeps counting from its anchor for
// a partition handed to another replica that has not committed there yet;
// dropping it would report that partition as owing nothing under `latest`.
TEST_F(KafkaSourceTest, lag_baseline_keeps_anchors_of_partitions_this_replica_no_longer_owns) {
  const auto topic = make_topic(2);
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 5; ++i) produce(topic, p, "before the group existed");
  }
  const auto group = unique_name("g");
  auto cfg = config(group, topic, "latest")
                 .property("enable.partition.eof", "true")
                 .property("partition.assignment.strategy", "range");
  // Every receive meets a failing floor commit: the group gets no commit,
  // so anchors are all either replica has.
  const auto receive_without_floor = [](KafkaSource& s) {
    fault::arm("kafka.floor_commit", fault::Action::kThrow);
    EXPECT_TRUE(s.receive(10, 200ms));
  };
  auto a = connect(cfg);
  ASSERT_TRUE(eventually([&] {
    receive_without_floor(*a);
    return a->snapshot().anchors.size() == 2;
  }));
  EXPECT_EQ(a->snapshot().anchors, (std::map<int32_t, int64_t>{{0, 5}, {1, 5}}));

  auto b = connect(cfg);
  ASSERT_TRUE(eventually(
      [&] {
        receive_without_floor(*b);
        receive_without_floor(*a);
        return a->snapshot().owned.size() == 1 && b->snapshot().owned.size() == 1;
      },
      60s))
      << "the rebalance did not split the partitions";
  fault::disarm_all();
  ASSERT_TRUE(committed(group, topic).empty()) << "the group must have no commit for this case";
  const int32_t moved = b->snapshot().owned.begin()->first;
  EXPECT_FALSE(a->snapshot().owned.contains(moved));
  EXPECT_EQ(a->snapshot().anchors.at(moved), 5) << "A keeps the anchor of the partition it lost";

  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 3; ++i) produce(topic, p, "owed");
  }
  auto lag = a->lag(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(lag) << lag.error().message;
  ASSERT_TRUE(*lag);
  EXPECT_EQ(**lag, 6) << "3 owed on each partition, the moved one counted from A's anchor; "
                         "an assignment-filtered baseline would say 3";
}

TEST_F(KafkaSourceTest, latest_floor_is_committed_before_the_batch_is_returned) {
  const auto topic = make_topic(1);
  produce(topic, 0, "before the group existed");
  const auto group = unique_name("g");
  auto source = connect(config(group, topic, "latest"));
  ASSERT_TRUE(source->receive(1, 100ms));
  ASSERT_TRUE(eventually([&] { return source->snapshot().owned.size() == 1; }));

  // Where `latest` resolves races the producer; produce until one record
  // lands after it, then check the broker before anything is acked.
  std::optional<Message> first;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!first && std::chrono::steady_clock::now() < deadline) {
    produce(topic, 0, "probe");
    auto batch = source->receive(1, 2s);
    ASSERT_TRUE(batch) << batch.error().message;
    if (!batch->empty()) first = batch->front();
  }
  ASSERT_TRUE(first);
  EXPECT_EQ(committed(group, topic), (std::map<int32_t, int64_t>{{0, coords(*first).offset}}))
      << "the floor must be durable before the batch reaches dispatch";
  EXPECT_EQ(source->snapshot().floors_committed, (std::set<int32_t>{0}));
}

// KAF-4's filter: an anchor is written only for a partition this consumer
// still owns, and only when it strictly raises the group's commit.
TEST_F(KafkaSourceTest, anchors_are_committed_only_when_owned_and_never_below_the_group) {
  const auto topic = make_topic(2);
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 3; ++i) produce(topic, p, "m");
  }
  const auto group = unique_name("g");
  auto cfg = config(group, topic).property("partition.assignment.strategy", "range");
  auto a = connect(cfg);
  ASSERT_EQ(receive_n(*a, 6).size(), 6u);
  EXPECT_EQ(a->snapshot().anchors, (std::map<int32_t, int64_t>{{0, 0}, {1, 0}}));

  auto b = connect(cfg);
  ASSERT_TRUE(b->receive(1, 100ms));
  const auto split = [&] {
    return a->snapshot().owned.size() == 1 && b->snapshot().owned.size() == 1;
  };
  ASSERT_TRUE(eventually(split, 60s));
  const int32_t a_owns = a->snapshot().owned.begin()->first;

  // Ownership: A holds anchors for both partitions but speaks only for its own.
  auto recovered = a->recover();
  ASSERT_TRUE(recovered) << recovered.error().message;
  EXPECT_EQ(committed(group, topic), (std::map<int32_t, int64_t>{{a_owns, 0}}));

  // B settles its partition up to offset 2 (A's rebuild may have reshuffled).
  ASSERT_TRUE(eventually(split, 60s));
  const int32_t b_owns = b->snapshot().owned.begin()->first;
  auto b_head = receive_at(*b, b_owns, 2);
  ASSERT_TRUE(b_head);
  ASSERT_TRUE(b->ack({*b_head}));
  std::map<int32_t, int64_t> expected{{a_owns, 0}};
  expected[b_owns] = 3;
  EXPECT_EQ(await_committed(group, topic, expected), expected);

  // B leaves; A gets B's partition back still carrying its first-read anchor
  // 0 — stale now that the group is at 3. Writing it would rewind the group.
  b.reset();
  ASSERT_TRUE(eventually([&] { return a->snapshot().owned.size() == 2; }, 60s));
  EXPECT_EQ(a->snapshot().anchors.at(b_owns), 0);
  recovered = a->recover();
  ASSERT_TRUE(recovered) << recovered.error().message;
  const auto after = committed(group, topic);
  EXPECT_EQ(after.at(b_owns), 3) << "an anchor below the group's commit was written";
}

TEST_F(KafkaSourceTest, lag_counts_uncommitted_records_over_all_partitions_from_every_replica) {
  const auto topic = make_topic(3);
  const int per_partition[] = {4, 3, 3};
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < per_partition[p]; ++i) produce(topic, p, "m");
  }
  const auto group = unique_name("g");
  auto source = connect(config(group, topic));
  auto got = receive_n(*source, 10);
  ASSERT_EQ(got.size(), 10u);
  std::vector<Message> heads;
  for (const auto& m : got) {
    if (coords(m).partition != 2 && coords(m).offset == 1) heads.push_back(m);
  }
  ASSERT_EQ(heads.size(), 2u);
  ASSERT_TRUE(source->ack(heads));  // 2 + 2 settled, partition 2 untouched
  await_committed(group, topic, {{0, 2}, {1, 2}});

  auto lag = source->lag(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(lag) << lag.error().message;
  EXPECT_EQ(*lag, std::optional<int64_t>(6));

  // Group-wide: a replica that has never received anything agrees.
  auto other = connect(config(group, topic));
  auto other_lag = other->lag(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(other_lag) << other_lag.error().message;
  EXPECT_EQ(*other_lag, std::optional<int64_t>(6));
}

TEST_F(KafkaSourceTest, lag_of_an_unknown_topic_is_a_config_error) {
  auto source = connect(config(unique_name("g"), unique_name("no-such-topic")));
  auto lag = source->lag(std::chrono::steady_clock::now() + 10s);
  ASSERT_FALSE(lag);
  EXPECT_EQ(lag.error().kind, ErrorKind::kConfig) << lag.error().message;
}

}  // namespace
}  // namespace harvest::kafka::testing
