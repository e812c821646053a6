// CON-16: 10,000 messages, 5 % forced redeliveries, 10 poison → exactly 9,990
// executions, zero duplicates, 10 dead letters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "connector_fixture.hpp"

namespace harvest::connector::testing {
namespace {

TEST_F(ConnectorTest, soak_10000_messages_with_redeliveries_and_poison) {
  auto t0 = std::chrono::steady_clock::now();
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source, ConnectorRuntimeConfig{.max_batch = 256});
  rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
  constexpr int kPartitions = 4, kMessages = 10'000, kPoison = 10;
  std::mt19937 rng(16);
  std::set<int> poison;
  while (poison.size() < kPoison) poison.insert(static_cast<int>(rng() % kMessages));
  std::vector<std::pair<int, int64_t>> delivered;  // (partition, offset) pushed once
  std::vector<int64_t> next(kPartitions, 0);
  int redeliveries = 0;
  for (int i = 0; i < kMessages; ++i) {
    int p = i % kPartitions;
    int64_t o = next[p]++;
    std::string body =
        poison.contains(i) ? fmt::format("poison #{}", i) : order_json(fmt::format("S-{}", i));
    source->push_kafka(p, o, body);
    // 5 % forced redeliveries: the same record delivered again a little later.
    if (rng() % 20 == 0) {
      source->push_kafka(p, o, body);
      ++redeliveries;
    }
  }
  size_t received = 0, acked = 0, dead = 0;
  while (source->pending() > 0) {
    auto s = rt->run_once();
    ASSERT_TRUE(s) << s.error().message;
    received += s->received;
    acked += s->acked;
    dead += s->dead_lettered;
    ASSERT_EQ(s->retried, 0u);
  }
  EXPECT_EQ(received, static_cast<size_t>(kMessages + redeliveries));
  EXPECT_EQ(acked + dead, received);
  EXPECT_EQ(executions(), kMessages - kPoison);
  EXPECT_EQ(scalar("SELECT count(*) FROM (SELECT workflow_id FROM harvest_workflow_executions "
                   "GROUP BY workflow_id HAVING count(*) > 1) d"),
            0)
      << "zero duplicates";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters"), kPoison);
  for (int p = 0; p < kPartitions; ++p) EXPECT_EQ(source->committed(p), next[p]);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("soak: %zu deliveries (%d forced redeliveries) in %.2f s (%.0f msg/s)\n", received,
              redeliveries, secs, received / secs);
}

}  // namespace
}  // namespace harvest::connector::testing
