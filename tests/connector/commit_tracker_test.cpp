// CON-6, CON-7: the contiguous-prefix commit tracker and its stall signals.
#include <gtest/gtest.h>

#include <harvest/connector/commit_tracker.hpp>

namespace harvest::connector {
namespace {

const PartitionKey kP{"orders", 0};

TEST(CommitTracker, commits_only_the_contiguous_prefix) {
  CommitTracker t;
  auto t10 = t.on_receive(kP, 10);
  auto t11 = t.on_receive(kP, 11);
  auto t12 = t.on_receive(kP, 12);
  EXPECT_EQ(t.on_settled(t11), std::nullopt) << "11 done while 10 in flight: nothing committed";
  EXPECT_EQ(t.on_settled(t12), std::nullopt);
  EXPECT_EQ(t.mark(kP), 10);
  EXPECT_EQ(t.on_settled(t10), 13) << "10 lands: 10, 11 and 12 commit at once";
  EXPECT_EQ(t.mark(kP), 13);
}

TEST(CommitTracker, redelivery_at_or_below_the_mark_is_re_acked_at_the_mark) {
  CommitTracker t;
  auto a = t.on_receive(kP, 5);
  auto b = t.on_receive(kP, 6);
  ASSERT_EQ(t.on_settled(a), 6);
  ASSERT_EQ(t.on_settled(b), 7);
  auto again = t.on_receive(kP, 5);  // a rebalance replays it
  EXPECT_TRUE(again.reack);
  EXPECT_EQ(t.on_settled(again), 7) << "re-acked at the current mark, never below it";
  EXPECT_EQ(t.mark(kP), 7);
}

TEST(CommitTracker, two_deliveries_of_one_offset_in_flight_settle_once) {
  CommitTracker t;
  auto first = t.on_receive(kP, 41);
  auto second = t.on_receive(kP, 41);
  EXPECT_EQ(t.on_settled(first), 42);
  EXPECT_EQ(t.on_settled(second), 42);
}

TEST(CommitTracker, fresh_delivery_below_the_mark_rebuilds_and_never_commits_a_stale_mark) {
  CommitTracker t;
  auto a = t.on_receive(kP, 100);
  auto b = t.on_receive(kP, 101);
  auto c = t.on_receive(kP, 102);  // still in flight when the partition is handed back
  ASSERT_EQ(t.on_settled(a), 101);
  ASSERT_EQ(t.on_settled(b), 102);
  // The group offset was reset to 20: a new generation starts there.
  auto low = t.on_receive(kP, 20);
  EXPECT_FALSE(low.reack);
  EXPECT_EQ(t.mark(kP), 20);
  EXPECT_EQ(t.on_settled(c), std::nullopt) << "a settlement of the old generation is dropped";
  EXPECT_EQ(t.on_settled(low), 21) << "one low offset commits 21, not the stale 103";
  auto next = t.on_receive(kP, 21);
  EXPECT_EQ(t.on_settled(next), 22);
}

TEST(CommitTracker, gaps_between_delivered_offsets_are_stepped_over) {
  CommitTracker t;
  auto a = t.on_receive(kP, 7);
  auto b = t.on_receive(kP, 9);  // 8 was a transaction marker: never delivered
  EXPECT_EQ(t.on_settled(b), std::nullopt);
  EXPECT_EQ(t.on_settled(a), 10);
}

TEST(CommitTracker, a_retried_offset_on_a_positional_source_is_a_stall_at_once) {
  CommitTracker t;
  auto head = t.on_receive(kP, 3);
  auto next = t.on_receive(kP, 4);
  t.on_retried(head, /*source_redelivers=*/false);
  ASSERT_EQ(t.on_settled(next), std::nullopt);
  auto stall = t.find_stall(0);
  ASSERT_TRUE(stall) << "the threshold 0 disables only the backlog heuristic";
  EXPECT_TRUE(stall->retried_head);
  EXPECT_EQ(stall->head, 3);
  EXPECT_EQ(stall->depth, 1u);
  EXPECT_EQ(stall->partition, kP);
}

TEST(CommitTracker, a_retry_on_a_redelivering_source_is_not_a_stall_until_the_backlog_builds) {
  CommitTracker t;
  auto head = t.on_receive(kP, 0);
  t.on_retried(head, /*source_redelivers=*/true);
  EXPECT_FALSE(t.find_stall(3));
  for (int64_t o = 1; o <= 2; ++o) ASSERT_EQ(t.on_settled(t.on_receive(kP, o)), std::nullopt);
  EXPECT_FALSE(t.find_stall(3));
  ASSERT_EQ(t.on_settled(t.on_receive(kP, 3)), std::nullopt);
  auto stall = t.find_stall(3);
  ASSERT_TRUE(stall);
  EXPECT_FALSE(stall->retried_head);
  EXPECT_EQ(stall->depth, 3u);
  EXPECT_EQ(stall->bound, 3u);
  EXPECT_EQ(stall->head, 0);
  EXPECT_FALSE(t.find_stall(0)) << "0 disables the backlog heuristic";
}

TEST(CommitTracker, clearing_everything_forgets_every_partitions_wedge_and_mark) {
  CommitTracker t;
  const PartitionKey other{kP.topic, kP.partition + 1};
  t.on_retried(t.on_receive(kP, 3), false);
  t.on_retried(t.on_receive(other, 7), false);
  t.clear();
  EXPECT_FALSE(t.find_stall(0)) << "no partition keeps a stale wedge after a rebuild";
  EXPECT_EQ(t.mark(kP), std::nullopt);
  EXPECT_EQ(t.mark(other), std::nullopt);
  EXPECT_EQ(t.on_settled(t.on_receive(other, 7)), 8);
}

TEST(CommitTracker, clearing_a_partition_forgets_its_mark) {
  CommitTracker t;
  auto head = t.on_receive(kP, 3);
  t.on_retried(head, false);
  ASSERT_TRUE(t.find_stall(0));
  t.clear(kP);
  EXPECT_FALSE(t.find_stall(0));
  EXPECT_EQ(t.mark(kP), std::nullopt);
  auto redelivered = t.on_receive(kP, 3);
  EXPECT_EQ(t.on_settled(redelivered), 4);
}

TEST(CommitTracker, partitions_are_independent) {
  CommitTracker t;
  PartitionKey p1{"orders", 1};
  auto a = t.on_receive(kP, 0);
  auto b = t.on_receive(p1, 0);
  EXPECT_EQ(t.on_settled(b), 1);
  EXPECT_EQ(t.mark(kP), 0);
  EXPECT_EQ(t.on_settled(a), 1);
}

}  // namespace
}  // namespace harvest::connector

namespace harvest::connector {
namespace {

// A rewind inside the settled range (CON-6): a delivery inside [base, mark)
// under a new source assignment generation (the partition handed back, or
// reset inside the settled range) is not a replay: the old mark is
// discarded and the prefix rebuilt from the new position, so the higher old
// mark is never committed for records the new assignment has not settled.
TEST(CommitTracker, a_new_source_generation_below_the_mark_rebuilds_the_prefix) {
  CommitTracker t;
  const PartitionKey p{"orders", 0};
  for (int64_t o = 0; o < 5; ++o) (void)t.on_settled(t.on_receive(p, o, 1));
  ASSERT_EQ(t.mark(p), 5);
  auto again = t.on_receive(p, 2, 2);  // handed back at offset 2
  EXPECT_FALSE(again.reack);
  auto three = t.on_receive(p, 3, 2);
  EXPECT_EQ(t.on_settled(three), std::nullopt) << "the head (2) is still open";
  EXPECT_EQ(t.on_settled(again), 4);
  EXPECT_EQ(t.mark(p), 4) << "rebuilt from the new position, not the old mark 5";
  // The same generation inside the range is still a replay.
  auto replay = t.on_receive(p, 2, 2);
  EXPECT_TRUE(replay.reack);
}

// Revoked partitions: the state of a partition the source no longer owns is
// forgotten, so it cannot report a stall.
TEST(CommitTracker, forgets_partitions_the_source_no_longer_owns) {
  CommitTracker t;
  const PartitionKey mine{"orders", 0}, theirs{"orders", 1};
  (void)t.on_receive(mine, 0, 1);
  auto head = t.on_receive(theirs, 0, 1);
  t.on_retried(head, /*source_redelivers=*/false);  // a wedged head
  ASSERT_TRUE(t.find_stall(0));
  EXPECT_EQ(t.forget_unowned([&](const PartitionKey& k, uint64_t) { return k == mine; }), 1u);
  EXPECT_FALSE(t.find_stall(0));
  EXPECT_TRUE(t.mark(mine));
  EXPECT_FALSE(t.mark(theirs));
}

}  // namespace
}  // namespace harvest::connector
