// A store outage, against the real broker and a real PostgreSQL crash: the
// store is stopped in immediate mode mid-stream (no shutdown checkpoint, every
// connection cut, crash recovery on restart) and started again 3 s later.
// Consumption must resume within 10 s of the store being back, with nothing
// lost, nothing started twice and no consumer rebuild: an outage is not a
// stalled partition.
//
// The store is a private cluster of this test's own (initdb into a temporary
// directory, on a free port), since the shared test cluster cannot be crashed.
#include <fmt/format.h>

#include <set>

#include "kafka_connector_fixture.hpp"
#include "support/private_cluster.hpp"
#include <harvest/common/log.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::kafka::testing {
namespace {

class KafkaStoreOutageTest : public KafkaConnectorTest {
 protected:
  void SetUp() override {
    KafkaConnectorTest::SetUp();
    if (HasFatalFailure()) return;
    cluster_ = std::make_unique<harvest::testing::PrivateCluster>("harvest-outage-pg");
    auto url = cluster_->start();
    ASSERT_TRUE(url) << url.error().describe();
    private_url_ = *url;
  }
  void TearDown() override {
    cluster_.reset();
    KafkaConnectorTest::TearDown();
  }

  bool pg_ctl(const std::string& action) { return cluster_->pg_ctl(action); }
  bool start_private() { return cluster_->start().has_value(); }
  long long private_count(const std::string& sql) { return cluster_->count(sql); }
  long long private_executions() {
    return private_count("SELECT count(*) FROM harvest_workflow_executions");
  }

  // Where the records that have no execution went: each one's coordinates,
  // the dead letters on the private store, and the group's commits.
  std::string diagnose(const Produced& produced, const std::string& group,
                       const std::string& topic) {
    std::string out;
    auto conn = store::Connection::open(private_url_);
    if (!conn) return "the private store does not answer";
    std::set<std::string> started;
    if (auto r =
            (*conn)->exec("SELECT input->>'order_id' AS id FROM harvest_workflow_executions")) {
      for (int i = 0; i < r->rows(); ++i) started.insert(r->get(i, "id"));
    }
    for (const auto& [id, ref] : produced.refs) {
      if (!started.contains(id)) out += fmt::format("no execution for {} ({})\n", id, ref);
    }
    if (auto r = (*conn)->exec("SELECT coordinates, reason, left(detail, 300) AS detail FROM "
                               "harvest_connector_dead_letters ORDER BY coordinates")) {
      for (int i = 0; i < r->rows(); ++i) {
        out += fmt::format("dead letter {}: {}: {}\n", r->get(i, "coordinates"),
                           r->get(i, "reason"), r->get(i, "detail"));
      }
    }
    for (const auto& [partition, offset] : committed(group, topic)) {
      out += fmt::format("partition {} committed {} of {}\n", partition, offset,
                         produced.end.count(partition) ? produced.end.at(partition) : -1);
    }
    return out;
  }

  std::unique_ptr<harvest::testing::PrivateCluster> cluster_;
  std::string private_url_;
};

TEST_F(KafkaStoreOutageTest, a_postgres_crash_mid_stream_resumes_within_10s_without_a_rebuild) {
  log::LogCapture capture;
  constexpr int kPartitions = 4;
  constexpr int kBefore = 200;
  constexpr int kDuring = 200;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, kBefore, "before", produced);

  auto source = connect(config(group, topic));
  ASSERT_TRUE(source);
  engine::EngineConfig engine_config;
  engine_config.database_url = private_url_;
  engine_config.profile = engine::Profile::kDev;  // applies the migrations to the fresh cluster
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  auto runtime_config = quick_config();
  runtime_config.max_batch = 16;  // many passes, so the crash lands mid-stream
  auto app = plugin::HarvestPlugin()
                 .engine_config(engine_config)
                 .workflows(connector::testing::connector_workflows())
                 .start_idempotency_window(std::chrono::hours(24 * 7))
                 .connector_with_config(binding("orders", topic), source, runtime_config)
                 .metrics(metrics)
                 .build();
  app->start();
  ASSERT_TRUE(eventually([&] { return private_executions() >= kBefore / 4; }, 30s));

  // Crash the store mid-stream; records keep arriving while it is down.
  ASSERT_TRUE(pg_ctl("-m immediate stop"));
  const auto down = std::chrono::steady_clock::now();
  produce_orders(topic, kPartitions, kDuring, "during", produced);
  // The outage itself: the store stays down 3 s (not a synchronisation wait).
  std::this_thread::sleep_until(down + 3s);
  ASSERT_TRUE(start_private());
  const auto back = std::chrono::steady_clock::now();

  const long long total = kBefore + kDuring;
  // 10 s on the plain build; stretched under ThreadSanitizer (kSanitizerSlowdown).
  const auto budget = 10s * harvest::testing::kSanitizerSlowdown;
  ASSERT_TRUE(eventually([&] { return private_executions() == total; }, budget))
      << "not resumed within " << budget.count()
      << " s of the store coming back: " << private_executions() << " of " << total << "\n"
      << diagnose(produced, group, topic);
  const auto resumed = std::chrono::steady_clock::now() - back;
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
  app->stop();
  std::cout << "[ figures  ] all " << total << " records durable "
            << std::chrono::duration_cast<std::chrono::milliseconds>(resumed).count()
            << " ms after PostgreSQL was back (down "
            << std::chrono::duration_cast<std::chrono::milliseconds>(back - down).count()
            << " ms)\n";

  EXPECT_LE(resumed, budget);
  EXPECT_EQ(private_count("SELECT count(DISTINCT input->>'order_id') FROM "
                          "harvest_workflow_executions"),
            total)
      << "nothing lost, nothing started twice";
  EXPECT_EQ(private_count("SELECT count(DISTINCT start_source_ref) FROM "
                          "harvest_workflow_executions"),
            total);
  EXPECT_EQ(metrics->counter_total(metrics::kConnectorRecoveries), 0) << "no consumer rebuild";
  EXPECT_EQ(capture.count_containing("rebuilding the source"), 0u);
  EXPECT_GE(capture.count_containing("the store is unreachable"), 1u) << "the outage was seen";
  EXPECT_EQ(metrics->gauge(metrics::kConnectorStoreUnavailable, {{"source", "orders"}}),
            std::optional<double>(0));
}

}  // namespace
}  // namespace harvest::kafka::testing
