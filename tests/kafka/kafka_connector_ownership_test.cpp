// CON-6 on the real broker: the commit tracker follows KafkaSource's
// assignment generations. A partition that comes back to this replica, from
// another replica or from an operator's offset reset, is tracked from where
// the broker now delivers it, never from the mark of its earlier assignment.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "kafka_connector_fixture.hpp"

namespace harvest::kafka::testing {
namespace {

using Offsets = std::map<int32_t, int64_t>;

// Another member rewinds the group inside the range this replica has
// already settled (as an operator's reset, or a replica with an older view,
// would): it takes one partition, commits offset 2 there and leaves. The
// partition comes back to A under a new generation at 2, and the prefix must
// be rebuilt from 2: with offset 2 settled and 3 refused once, the commit is
// 3. Were the redeliveries taken for replays below A's old mark, settling 2
// would commit 5 while 3 was still undone, and a crash there would skip it.
TEST_F(KafkaConnectorTest, a_reset_inside_the_settled_range_is_committed_from_the_new_position) {
  const auto topic = make_topic(2);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, 2, 10, "reset", produced);
  std::atomic<int32_t> refuse_partition{-1};
  auto refuse_once = binding("orders", topic, [&](const connector::MessageCtx& ctx, const Order&) {
    const auto& at = std::get<connector::KafkaCoordinates>(ctx.coordinates());
    int32_t expected = at.partition;
    if (at.offset == 3 && refuse_partition.compare_exchange_strong(expected, -1)) {
      return std::optional<std::string>("refused once after the rewind");
    }
    return std::optional<std::string>();
  });
  auto source = connect(config(group, topic).property("partition.assignment.strategy", "range"));
  // Driven pass by pass from this thread; the source's own poller keeps it
  // in the group and serves the rebalances.
  auto rt = runtime(refuse_once, source, quick_config());
  ASSERT_TRUE(eventually(
      [&] {
        (void)rt->run_once();
        return committed(group, topic) == produced.end;
      },
      60s));
  ASSERT_EQ(executions(), 10);

  auto rewound = broker_->rewind_as_member(group, topic, 2);
  ASSERT_TRUE(rewound) << rewound.error().message;
  ASSERT_EQ(rewound->size(), 1u);
  const int32_t p = rewound->front();
  const int32_t other = 1 - p;
  ASSERT_TRUE(eventually([&] { return source->snapshot().owned.size() == 2; }, 60s));
  ASSERT_EQ(committed(group, topic), (Offsets{{p, 2}, {other, 5}}));

  refuse_partition = p;
  ASSERT_TRUE(eventually(
      [&] {
        (void)rt->run_once();
        return refuse_partition.load() == -1;
      },
      60s))
      << "the records from the rewound position were never dispatched again";
  EXPECT_EQ(await_committed(group, topic, {{p, 3}, {other, 5}}, 10s), (Offsets{{p, 3}, {other, 5}}))
      << "the commit did not follow the rebuilt prefix";
  std::this_thread::sleep_for(1s);  // long enough for a stray async commit to land
  EXPECT_EQ(committed(group, topic), (Offsets{{p, 3}, {other, 5}}))
      << "the old mark was committed over a record not yet dispatched again";

  // Let it run: the wedge at 3 is rebuilt, and each redelivered record
  // resolves to the execution it started the first time.
  {
    Consumer consumer(*rt);
    EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
  }
  std::vector<std::string> duplicates;
  EXPECT_EQ(execution_refs(&duplicates), produced.refs);
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(executions(), 10);
}

// A partition handed to replica B, advanced there, and handed back to A
// arrives at B's commit, above A's old mark. A tracks it from there: its
// commits follow at once, with no stall on the gap and no rebuild.
TEST_F(KafkaConnectorTest,
       a_partition_handed_back_after_a_rebalance_is_tracked_from_its_new_position) {
  const auto topic = make_topic(2);
  const auto group = unique_name("g");
  auto cfg = config(group, topic).property("partition.assignment.strategy", "range");
  Produced produced;
  produce_orders(topic, 2, 10, "first", produced);
  auto a_source = connect(cfg);
  auto a = runtime(binding("orders", topic), a_source, quick_config());
  std::optional<Consumer> a_consumer(std::in_place, *a);
  ASSERT_EQ(await_committed(group, topic, produced.end), produced.end);

  {
    auto b_source = connect(cfg);
    auto b = runtime(binding("orders", topic), b_source, quick_config());
    Consumer b_consumer(*b);
    ASSERT_TRUE(eventually(
        [&] {
          return a_source->snapshot().owned.size() == 1 && b_source->snapshot().owned.size() == 1;
        },
        60s))
        << "the group did not split the partitions";
    produce_orders(topic, 2, 10, "while-split", produced);
    ASSERT_EQ(await_committed(group, topic, produced.end), produced.end);
    EXPECT_EQ(b->recoveries(), 0u);
  }  // B leaves the group; its partition goes back to A at B's commit
  ASSERT_TRUE(eventually([&] { return a_source->snapshot().owned.size() == 2; }, 60s));

  produce_orders(topic, 2, 10, "handed-back", produced);
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end)
      << "A did not commit on the partition it got back";
  a_consumer.reset();
  EXPECT_EQ(a->recoveries(), 0u) << "the gap above A's old mark was taken for a stall";
  std::vector<std::string> duplicates;
  EXPECT_EQ(execution_refs(&duplicates), produced.refs);
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(executions(), 30);
}

}  // namespace
}  // namespace harvest::kafka::testing
