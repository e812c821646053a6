// CON-5 / KAF-4 / KAF-6 with real crashes: a consumer process
// (kafka_consumer_process) SIGKILLed by the fault point
// `connector.after_dispatch_before_ack` — after its dispatch committed in
// PostgreSQL, before the offset commit — and restarted. The redeliveries
// must resolve to the executions that already exist: nothing lost, nothing
// started twice; under `latest`, the restart must not re-resolve past the
// accepted record.
#include <signal.h>

#include "consumer_process.hpp"
#include "kafka_connector_fixture.hpp"

namespace harvest::kafka::testing {
namespace {

constexpr const char* kKillAtAck = "HARVEST_FAULT_POINTS=connector.after_dispatch_before_ack=kill";

// "topic:partition:offset" -> (partition, offset).
std::pair<int32_t, int64_t> position(const std::string& ref) {
  const auto last = ref.rfind(':');
  const auto before = ref.rfind(':', last - 1);
  return {std::stoi(ref.substr(before + 1, last - before - 1)), std::stoll(ref.substr(last + 1))};
}

class KafkaCrashTest : public KafkaConnectorTest {
 protected:
  std::vector<std::string> consumer_args(const std::string& group, const std::string& topic,
                                         std::vector<std::string> more) {
    std::vector<std::string> args{"--db",    db_url(), "--bootstrap", broker_->bootstrap(),
                                  "--topic", topic,    "--group",     group};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
};

TEST_F(KafkaCrashTest, kill_between_dispatch_commit_and_offset_commit_redelivers_to_the_same_runs) {
  constexpr int kPartitions = 4;
  constexpr int kFirst = 100;
  constexpr int kSecond = 100;
  constexpr int kMaxBatch = 16;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, kFirst, "settled", produced);

  // A clean consumer settles the first records and leaves, committing them:
  // the group's commit is somewhere real before the crash.
  {
    ConsumerProcess clean(consumer_args(group, topic, {"--settle", std::to_string(kFirst)}), {});
    const Exit exit = clean.wait();
    ASSERT_TRUE(exit.exited && exit.code == 0) << exit.output;
    EXPECT_EQ(printed(exit.output, "dispatched"), kFirst) << exit.output;
  }
  const auto before = await_committed(group, topic, produced.end);
  ASSERT_EQ(before, produced.end);

  // More records; this consumer dies by SIGKILL right after its first batch's
  // dispatches commit, before that batch's offsets are committed.
  produce_orders(topic, kPartitions, kSecond, "crash", produced);
  {
    ConsumerProcess doomed(consumer_args(group, topic,
                                         {"--settle", std::to_string(kSecond), "--max-batch",
                                          std::to_string(kMaxBatch)}),
                           {kKillAtAck});
    const Exit exit = doomed.wait();
    ASSERT_TRUE(exit.signaled) << "exited with " << exit.code << ": " << exit.output;
    EXPECT_EQ(exit.signal, SIGKILL);
    EXPECT_EQ(exit.output, "") << "it must die before printing its result";
  }
  std::vector<std::string> duplicates;
  const auto after_kill = execution_refs(&duplicates);
  EXPECT_TRUE(duplicates.empty());
  const long long committed_by_the_killed = executions() - kFirst;
  ASSERT_GE(committed_by_the_killed, 1) << "the killed batch's dispatches committed";
  ASSERT_LE(committed_by_the_killed, kMaxBatch);
  EXPECT_EQ(committed(group, topic), before) << "the killed batch's offsets were committed";
  for (const auto& [order_id, ref] : after_kill) {
    if (!order_id.starts_with("crash")) continue;
    const auto [partition, offset] = position(ref);
    EXPECT_GE(offset, before.at(partition))
        << order_id << " is an execution whose offset the group's commit already covers";
  }

  // The restart redelivers everything after the commit; the killed batch's
  // records resolve to their existing executions.
  {
    ConsumerProcess restarted(consumer_args(group, topic,
                                            {"--settle", std::to_string(kSecond), "--executions",
                                             std::to_string(kFirst + kSecond)}),
                              {});
    const Exit exit = restarted.wait();
    ASSERT_TRUE(exit.exited && exit.code == 0) << exit.output;
    EXPECT_EQ(printed(exit.output, "idempotent_replay"), committed_by_the_killed) << exit.output;
    EXPECT_EQ(printed(exit.output, "dispatched"), kSecond - committed_by_the_killed) << exit.output;
  }
  EXPECT_EQ(execution_refs(&duplicates), produced.refs) << "lost or unexpected executions";
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(executions(), kFirst + kSecond);
  EXPECT_EQ(claims(), kFirst + kSecond) << "one dedupe claim per record: the replays reused theirs";
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
}

TEST_F(KafkaCrashTest, latest_consumer_killed_before_any_ack_does_not_skip_the_accepted_record) {
  constexpr int kPartitions = 2;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced old;  // before the group exists: `latest` starts after them
  produce_orders(topic, kPartitions, 4, "old", old);
  const std::vector<std::string> latest{"--reset", "latest", "--eof", "--settle", "1"};

  Produced accepted;
  {
    ConsumerProcess doomed(consumer_args(group, topic, latest), {kKillAtAck});
    // The eager floor commit (KAF-4) is the sign that the consumer has
    // resolved `latest` on both partitions: a record produced now is its.
    EXPECT_EQ(await_committed(group, topic, old.end, 60s), old.end)
        << "the latest floor was not committed before any record";
    produce_order(topic, 1, "accepted", accepted);
    const Exit exit = doomed.wait();
    ASSERT_TRUE(exit.signaled) << "exited with " << exit.code << ": " << exit.output;
    EXPECT_EQ(exit.signal, SIGKILL);
  }
  EXPECT_EQ(execution_refs(), accepted.refs) << "the accepted record's dispatch committed";
  EXPECT_EQ(committed(group, topic), old.end) << "its offset was never committed";

  // A replacement with the same `latest` config resumes at the floor, not at
  // today's log end.
  {
    ConsumerProcess restarted(consumer_args(group, topic, latest), {});
    const Exit exit = restarted.wait();
    ASSERT_TRUE(exit.exited && exit.code == 0) << exit.output;
    EXPECT_EQ(printed(exit.output, "idempotent_replay"), 1) << exit.output;
    EXPECT_EQ(printed(exit.output, "dispatched"), 0) << exit.output;
  }
  EXPECT_EQ(execution_refs(), accepted.refs);
  EXPECT_EQ(claims(), 1);
  auto end = old.end;
  end[1] = accepted.end.at(1);
  EXPECT_EQ(await_committed(group, topic, end), end);
}

}  // namespace
}  // namespace harvest::kafka::testing
