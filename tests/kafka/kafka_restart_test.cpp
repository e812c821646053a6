// Fast restarts: a process with a stable instance id, SIGKILLed and restarted,
// consumes again at once and takes back the runs it had in flight without
// waiting for their leases. Kafka static membership (group.instance.id from
// the instance id) hands the restarted consumer its partitions without waiting
// for the dead member's session to time out (30 s here); the worker's
// own-prefix claim reclaims runs leased by the dead incarnation (60 s leases
// here). Both waits are far longer than the 10 s the restart is given.
#include <fmt/format.h>

#include "consumer_process.hpp"
#include "kafka_connector_fixture.hpp"

namespace harvest::kafka::testing {
namespace {

class KafkaRestartTest : public KafkaConnectorTest {
 protected:
  std::vector<std::string> args(const std::string& group, const std::string& topic,
                                const std::string& instance, std::vector<std::string> more) {
    std::vector<std::string> out{
        "--db",     db_url(),     "--bootstrap", broker_->bootstrap(),   "--topic",
        topic,      "--group",    group,         "--instance-id",        instance,
        "--worker", "--lease-ms", "60000",       "--session-timeout-ms", "30000"};
    out.insert(out.end(), more.begin(), more.end());
    return out;
  }
  long long count(const std::string& where) {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE " + where);
  }
};

TEST_F(KafkaRestartTest, a_killed_instance_restarts_consuming_and_reclaims_its_runs_within_10s) {
  constexpr int kPartitions = 4;
  constexpr int kFirst = 40;
  constexpr int kSecond = 40;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  const std::string instance = unique_name("pod");
  Produced produced;
  produce_orders(topic, kPartitions, kFirst, "first", produced);

  // The first incarnation takes every record and runs (holds) them until it
  // is killed: its runs are in flight under leases that outlive the test.
  ConsumerProcess first(args(group, topic, instance, {"--hold", "--settle", "100000"}), {});
  ASSERT_TRUE(eventually(
      [&] {
        return count("true") == kFirst &&
               count(fmt::format("id IN (SELECT execution_id FROM harvest_run_leases WHERE "
                                 "starts_with(lease_owner, '{}@'))",
                                 instance)) > 0;
      },
      40s))
      << "the first incarnation never had runs in flight";
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
  first.kill_now();
  const long long in_flight = count(
      "id IN (SELECT execution_id FROM harvest_run_leases WHERE lease_expires_at > now() + "
      "interval '30 seconds')");
  ASSERT_GT(in_flight, 0) << "runs leased by the dead incarnation";

  produce_orders(topic, kPartitions, kSecond, "second", produced);
  const auto restart = std::chrono::steady_clock::now();
  ConsumerProcess second(args(group, topic, instance,
                              {"--executions", std::to_string(kFirst + kSecond), "--completed",
                               std::to_string(kFirst + kSecond), "--timeout-ms", "10000"}),
                         {});
  const Exit exit = second.wait(30s);
  const auto took = std::chrono::steady_clock::now() - restart;
  std::cout << "[ figures  ] restarted instance consumed " << kSecond << " records and completed "
            << in_flight << " reclaimed runs in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  ASSERT_TRUE(exit.exited && exit.code == 0)
      << "not done within 10 s of the restart (exit " << exit.code << "): " << exit.output;
  EXPECT_LE(took, 10s);
  EXPECT_EQ(printed(exit.output, "dispatched"), kSecond) << exit.output;

  std::vector<std::string> duplicates;
  EXPECT_EQ(execution_refs(&duplicates), produced.refs) << "lost or unexpected executions";
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(count("status = 'completed'"), kFirst + kSecond)
      << "the dead incarnation's runs were reclaimed without waiting for their 60 s leases";
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
}

}  // namespace
}  // namespace harvest::kafka::testing
