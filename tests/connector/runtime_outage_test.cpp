// Store outages (an unreachable store, and a read-only one): a store outage pauses intake instead
// of stalling the binding. Commits that fail because the store is unreachable never count toward
// a stall (no consumer rebuild); the received messages are held unacked and dispatched again, in
// order, once a probe finds the store back. And one rebuild clears every partition's stall state,
// not only the one that reported it.
//
// The outage is real: the test's database refuses new connections and every
// session on it is terminated (57P01), so the engine sees exactly what a
// PostgreSQL restart looks like from a client.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "connector_fixture.hpp"
#include <harvest/common/log.hpp>
#include <harvest/connector/commit_tracker.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;

class ConnectorOutageTest : public ConnectorTest {
 protected:
  // Refuses (or again accepts) connections to this test's database; refusing
  // also ends every session on it (the test's own is reopened when the
  // database is reachable again). Issued from the cluster's admin database:
  // PostgreSQL will not close the database a session is connected to.
  void set_reachable(bool reachable) {
    auto admin = store::Connection::open(harvest::testing::admin_url());
    ASSERT_TRUE(admin) << admin.error().describe();
    auto altered = (*admin)->exec(fmt::format("ALTER DATABASE {} ALLOW_CONNECTIONS {}",
                                              store::quote_ident(db_name_), reachable));
    ASSERT_TRUE(altered) << altered.error().describe();
    if (reachable) {
      auto own = store::Connection::open(db_url_);
      ASSERT_TRUE(own) << own.error().describe();
      conn_ = std::move(*own);
      return;
    }
    auto ended = (*admin)->exec(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = $1",
        {db_name_});
    ASSERT_TRUE(ended) << ended.error().describe();
  }
  // Sets (or clears) default_transaction_read_only on this test's database,
  // as a primary fenced for a failover looks, and ends its sessions so the
  // next ones take the new default (ALTER DATABASE ... SET applies to new
  // sessions; the cluster-wide ALTER SYSTEM would reach other tests).
  void set_read_only(bool on) {
    auto admin = store::Connection::open(harvest::testing::admin_url());
    ASSERT_TRUE(admin) << admin.error().describe();
    auto altered =
        (*admin)->exec(fmt::format("ALTER DATABASE {} SET default_transaction_read_only = {}",
                                   store::quote_ident(db_name_), on ? "on" : "off"));
    ASSERT_TRUE(altered) << altered.error().describe();
    auto ended = (*admin)->exec(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
        {db_name_});
    ASSERT_TRUE(ended) << ended.error().describe();
    auto own = store::Connection::open(db_url_);
    ASSERT_TRUE(own) << own.error().describe();
    conn_ = std::move(*own);
  }
  double gauge(const char* name) {
    return metrics_->gauge(name, {{"source", "orders"}}).value_or(-1);
  }
  double retried(const char* reason) {
    return metrics_->counter(metrics::kConnectorRetried,
                             {{"source", "orders"}, {"reason", reason}});
  }
  long long distinct_refs() {
    return scalar("SELECT count(DISTINCT start_source_ref) FROM harvest_workflow_executions");
  }
};

TEST_F(ConnectorOutageTest, an_unreachable_store_pauses_intake_and_never_rebuilds_the_consumer) {
  log::LogCapture capture;
  constexpr int kPartitions = 3;
  constexpr int kPerPartition = 10;
  auto source = std::make_shared<MockSource>("orders.placed");
  ConnectorRuntimeConfig config;
  config.idle_backoff = 10ms;
  config.poll_timeout = 50ms;
  config.store_probe_initial = 20ms;
  config.store_probe_max = 200ms;
  auto rt = runtime(order_binding(), source, config);
  int next = 0;
  auto push_round = [&](int per_partition) {
    for (int i = 0; i < per_partition; ++i, ++next) {
      for (int p = 0; p < kPartitions; ++p) {
        source->push_kafka(p, next, order_json(fmt::format("{}-{}", p, next)));
      }
    }
  };
  push_round(kPerPartition);
  set_reachable(false);
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });

  // The first batch fails on the store: held, not retried into a stall.
  ASSERT_TRUE(
      PgTest::eventually([&] { return gauge(metrics::kConnectorStoreUnavailable) == 1; }, 10s));
  EXPECT_EQ(retried("store_unavailable"), kPartitions * kPerPartition);
  EXPECT_EQ(retried("transient"), 0);
  // Intake is paused: what arrives during the outage stays with the broker.
  push_round(kPerPartition);
  EXPECT_FALSE(
      PgTest::eventually([&] { return source->pending() < kPartitions * kPerPartition; }, 500ms))
      << "the runtime kept receiving while the store was down";
  EXPECT_TRUE(source->acked().empty());
  EXPECT_EQ(source->recoveries(), 0);

  set_reachable(true);
  const auto back = std::chrono::steady_clock::now();
  ASSERT_TRUE(PgTest::eventually(
      [&] {
        for (int p = 0; p < kPartitions; ++p) {
          if (source->committed(p) != 2 * kPerPartition) return false;
        }
        return true;
      },
      10s));
  const auto resumed = std::chrono::steady_clock::now() - back;
  stop.request_stop();
  consumer.join();
  std::cout << "[ figures  ] resumed "
            << std::chrono::duration_cast<std::chrono::milliseconds>(resumed).count()
            << " ms after the store came back\n";

  EXPECT_EQ(executions(), 2 * kPartitions * kPerPartition) << "nothing lost, nothing twice";
  EXPECT_EQ(distinct_refs(), 2 * kPartitions * kPerPartition);
  EXPECT_EQ(source->recoveries(), 0) << "an outage is not a stall";
  EXPECT_EQ(rt->recoveries(), 0u);
  EXPECT_EQ(metrics_->counter_total(metrics::kConnectorRecoveries), 0);
  EXPECT_EQ(gauge(metrics::kConnectorStoreUnavailable), 0);
  EXPECT_EQ(capture.count_containing("the store is unreachable"), 1u)
      << "logged once entering (leaving is logged at info)";
  EXPECT_EQ(capture.count_containing("transient dispatch failure"), 0u);
}

TEST_F(ConnectorOutageTest, a_failed_probe_backs_off_and_a_held_batch_goes_first_once_it_answers) {
  auto source = std::make_shared<MockSource>("orders.placed");
  ConnectorRuntimeConfig config;
  config.poll_timeout = 10ms;
  config.store_probe_initial = 10ms;
  config.store_probe_max = 40ms;
  auto rt = runtime(order_binding(), source, config);
  source->push_kafka(0, 0, order_json("a"));
  source->push_kafka(0, 1, order_json("b"));
  set_reachable(false);
  auto first = rt->run_once();
  ASSERT_TRUE(first) << "an outage is not a ConnectorError";
  EXPECT_TRUE(first->store_unavailable);
  EXPECT_EQ(first->held, 2u);
  EXPECT_EQ(rt->store_probe_delay(), 10ms);
  for (auto expected : {20ms, 40ms, 40ms}) {
    auto probe = rt->run_once();
    ASSERT_TRUE(probe);
    EXPECT_TRUE(probe->store_unavailable);
    EXPECT_EQ(probe->received, 0u);
    EXPECT_EQ(rt->store_probe_delay(), expected) << "doubling, capped";
  }
  source->push_kafka(0, 2, order_json("c"));
  set_reachable(true);
  auto held = rt->run_once();
  ASSERT_TRUE(held);
  EXPECT_FALSE(held->store_unavailable) << "one probe finds the store back";
  EXPECT_EQ(held->received, 0u) << "the held batch goes before anything new";
  EXPECT_EQ(held->acked, 2u);
  EXPECT_EQ(source->committed(0), 2);
  auto fresh = rt->run_once();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->received, 1u);
  EXPECT_EQ(source->committed(0), 3);
  EXPECT_EQ(executions(), 3);
}

// A read-only store: a database that answers but refuses writes (a primary
// set read-only while a failover is under way, or a standby) is an outage
// for intake: every message held unacked, the undecodable one included, no
// dead letter, no rebuild, and the probe keeps intake paused until writes
// are accepted again; then everything goes through exactly once.
TEST_F(ConnectorOutageTest, a_read_only_store_pauses_intake_dead_letters_nothing_and_resumes) {
  log::LogCapture capture;
  auto source = std::make_shared<MockSource>("orders.placed");
  ConnectorRuntimeConfig config;
  config.poll_timeout = 10ms;
  config.store_probe_initial = 10ms;
  config.store_probe_max = 20ms;
  auto rt = runtime(order_binding(), source, config, /*with_sink=*/false);
  rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
  source->push_kafka(0, 0, order_json("a"));
  source->push_kafka(0, 1, "this is not JSON");
  source->push_kafka(0, 2, order_json("b"));
  set_read_only(true);
  // The probe answers from a fresh session and sees it read-only.
  auto probed = engine_->probe_store();
  ASSERT_FALSE(probed);
  EXPECT_TRUE(is_unavailable(probed.error()));
  EXPECT_NE(probed.error().message.find("accepts no writes"), std::string::npos)
      << probed.error().message;

  auto first = rt->run_once();
  ASSERT_TRUE(first) << "a read-only store is not a ConnectorError";
  EXPECT_TRUE(first->store_unavailable);
  EXPECT_EQ(first->held, 3u) << "the undecodable message is held too: its dead letter is a write";
  for (int i = 0; i < 5; ++i) {
    auto probe = rt->run_once();
    ASSERT_TRUE(probe);
    EXPECT_TRUE(probe->store_unavailable) << "a read-only store keeps intake paused";
    EXPECT_EQ(probe->acked, 0u);
  }
  EXPECT_TRUE(source->acked().empty());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters"), 0);
  EXPECT_EQ(executions(), 0);
  EXPECT_EQ(retried("transient"), 0);
  EXPECT_EQ(capture.count_containing("the store answers again"), 0u);

  set_read_only(false);
  auto back = rt->run_once();
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->store_unavailable);
  EXPECT_EQ(back->acked, 2u);
  EXPECT_EQ(back->dead_lettered, 1u);
  EXPECT_EQ(source->committed(0), 3);
  EXPECT_EQ(executions(), 2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters WHERE reason = "
                   "'undecodable'"),
            1);
  EXPECT_EQ(source->recoveries(), 0);
  EXPECT_EQ(metrics_->counter_total(metrics::kConnectorRecoveries), 0);
  EXPECT_EQ(capture.count_containing("dead-letter write"), 0u);
}

TEST_F(ConnectorOutageTest, one_rebuild_clears_the_stall_state_of_every_partition) {
  constexpr int kPartitions = 4;
  auto source = std::make_shared<MockSource>("orders.placed");
  ConnectorRuntimeConfig config;
  config.idle_backoff = 10ms;
  config.poll_timeout = 50ms;
  // The first delivery of every record is rejected (a transient mapping
  // refusal): every partition's head is wedged in the same pass.
  auto seen = std::make_shared<std::set<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  b.map_json([seen, mu](const MessageCtx& ctx, Order o) -> MapResult {
    std::lock_guard lock(*mu);
    if (seen->insert(render(ctx.coordinates())).second) {
      return std::unexpected("not yet");
    }
    return MappedMessage{"order-" + o.order_id, o};
  });
  auto rt = runtime(b, source, config);
  for (int p = 0; p < kPartitions; ++p) {
    for (int o = 0; o < 3; ++o) source->push_kafka(p, o, order_json(fmt::format("{}-{}", p, o)));
  }
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });
  ASSERT_TRUE(PgTest::eventually([&] {
    for (int p = 0; p < kPartitions; ++p) {
      if (source->committed(p) != 3) return false;
    }
    return true;
  }));
  stop.request_stop();
  consumer.join();
  EXPECT_EQ(source->recoveries(), 1) << "one rebuild redelivers every partition";
  EXPECT_EQ(rt->recoveries(), 1u);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRecoveries, {{"source", "orders"}}), 1);
  EXPECT_FALSE(rt->tracker().find_stall(rt->stall_threshold()));
  EXPECT_EQ(executions(), kPartitions * 3);
}

}  // namespace
}  // namespace harvest::connector::testing
