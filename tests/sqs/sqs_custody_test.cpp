// SQS-5 custody: a message is received once and becomes one run, whatever the
// connector does around it. A receive is not free on SQS: each one counts
// towards the redrive policy's maxReceiveCount, so a consumer that releases
// messages it holds (at a stop, a lag sample, a store outage) pushes good
// messages toward the DLQ. Each test records, from the mapper, every delivery
// of every message with its ApproximateReceiveCount, against the real
// SQS-compatible server (ElasticMQ) and a real PostgreSQL.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "support/pg_fixture.hpp"
#include "support/private_cluster.hpp"
#include "test_queues.hpp"
#include <harvest/common/log.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/sqs/sqs_source.hpp>

namespace harvest::sqs {
namespace {

using connector::MappedMessage;
using connector::MapResult;
using connector::MessageCtx;
using connector::SourceBinding;
using connector::SqsCoordinates;
using engine::Json;
using testing::QueueDepth;
using namespace std::chrono_literals;

// Every delivery the mapper saw: (MessageId, receive count), across threads.
struct Deliveries {
  mutable std::mutex mu;
  std::vector<std::pair<std::string, int>> seen;
  void record(const MessageCtx& ctx) {
    std::lock_guard lock(mu);
    seen.emplace_back(std::get<SqsCoordinates>(ctx.coordinates()).message_id, ctx.receive_count());
  }
  // Deliveries per MessageId.
  std::map<std::string, int> per_message() const {
    std::lock_guard lock(mu);
    std::map<std::string, int> n;
    for (const auto& [id, count] : seen) ++n[id];
    return n;
  }
  // The highest receive count any delivery carried.
  int highest_receive_count() const {
    std::lock_guard lock(mu);
    int top = 0;
    for (const auto& [id, count] : seen) top = std::max(top, count);
    return top;
  }
  // Messages received more than once (by their highest receive count).
  size_t received_again() const {
    std::lock_guard lock(mu);
    std::set<std::string> again;
    for (const auto& [id, count] : seen)
      if (count > 1) again.insert(id);
    return again.size();
  }
};

engine::WorkflowRegistry ingest_workflow() {
  engine::WorkflowRegistry r;
  r.add("ingest", [](engine::WorkflowContext&, Json in) { return in; });
  return r;
}

// A JSON body {"id": ...} starts run "event-<id>"; each delivery is recorded.
SourceBinding recorded_binding(Deliveries& deliveries) {
  auto b = SourceBinding::starts("events", "events", "ingest");
  b.map_json([&deliveries](const MessageCtx& ctx, Json body) -> MapResult {
    deliveries.record(ctx);
    return MappedMessage{"event-" + body.at("id").get<std::string>(), body};
  });
  return b;
}

std::vector<std::string> bodies(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(Json{{"id", std::to_string(i)}}.dump());
  return out;
}

class SqsCustodyTest : public harvest::testing::PgTest {
 protected:
  SqsSourceConfig source_config(const std::string& queue, int visibility_secs) {
    return SqsSourceConfig(queue)
        .stream("events")
        .endpoint(queues_.endpoint())
        .region("us-east-1")
        .credentials(queues_.credentials())
        .visibility_timeout_secs(visibility_secs);
  }
  std::unique_ptr<plugin::HarvestApp> app_on(const std::string& db, const std::string& queue,
                                             Deliveries& deliveries, int visibility_secs,
                                             connector::ConnectorRuntimeConfig config) {
    auto source = SqsSource::connect(source_config(queue, visibility_secs));
    EXPECT_TRUE(source) << source.error().message;
    engine::EngineConfig engine_config;
    engine_config.database_url = db;
    engine_config.profile =
        engine::Profile::kDev;  // applies the migrations to a fresh private cluster
    plugin::HarvestPlugin p;
    p.engine_config(engine_config).workflows(ingest_workflow());
    p.connector_with_config(recorded_binding(deliveries).broker_native_dead_letter(), *source,
                            config);
    return p.build();
  }
  long long executions() { return scalar("SELECT count(*) FROM harvest_workflow_executions"); }

  sqs::testing::TestQueues queues_;
};

// Receive-ahead fetches the next batch while the current one commits; a stop
// used to release that batch unread, spending a receive on each message, so
// with maxReceiveCount 2 a few restarts pushed good messages into the DLQ (10
// of 200 over 5 stops). Now the runtime dispatches what was received ahead
// before it stops: over five stops, every message is delivered exactly once,
// on its first receive, and becomes exactly one run.
TEST_F(SqsCustodyTest, restarts_mid_flow_never_push_a_good_message_toward_the_dlq) {
  auto q = queues_.create_redriven("custody", /*max_receive_count=*/2);
  (void)queues_.send(q.url, bodies(0, 200));
  Deliveries deliveries;
  const connector::ConnectorRuntimeConfig config{
      .poll_timeout = 200ms, .idle_backoff = 10ms, .max_batch = 10};
  // Stopped at five different points of the flow, some while a batch is
  // being committed (the one after it received ahead).
  for (long long stop_at : {15, 47, 90, 121, 168}) {
    auto app = app_on(db_url(), q.url, deliveries, 120, config);
    app->start();
    ASSERT_TRUE(eventually([&] { return executions() >= stop_at; }, 30s)) << stop_at;
    app->stop();
  }
  auto last = app_on(db_url(), q.url, deliveries, 120, config);
  last->start();
  EXPECT_TRUE(eventually([&] { return executions() == 200; }, 60s)) << executions();
  last->stop();
  EXPECT_EQ(executions(), 200) << "every message is exactly one run";
  EXPECT_EQ(scalar("SELECT count(DISTINCT workflow_id) FROM harvest_workflow_executions"), 200);
  EXPECT_EQ(queues_.depth(q.url), (QueueDepth{0, 0})) << "every message acked";
  EXPECT_EQ(queues_.depth(q.dlq_url), (QueueDepth{0, 0})) << "no good message in the DLQ";
  const auto per_message = deliveries.per_message();
  EXPECT_EQ(per_message.size(), 200u);
  for (const auto& [id, n] : per_message) EXPECT_EQ(n, 1) << id << " was delivered " << n << "x";
  EXPECT_EQ(deliveries.highest_receive_count(), 1) << "a stop spent a receive";
}

// A lag sample is a broker call; the runtime dispatches what the source
// received ahead before it (no message sits invisible across the call), and
// never hands it back. With a sample due every 20 ms the gauge is sampled
// many times mid-flow, and still every message is received once.
TEST_F(SqsCustodyTest, lag_samples_mid_flow_never_spend_a_receive) {
  auto q = queues_.create_redriven("custody-lag", /*max_receive_count=*/2);
  (void)queues_.send(q.url, bodies(0, 150));
  Deliveries deliveries;
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  auto source = std::make_shared<SqsSource>(
      queues_.client(), SqsSourceConfig(q.url).stream("events").visibility_timeout_secs(120));
  auto engine = open_engine(ingest_workflow());
  connector::ConnectorRuntime rt(
      std::make_shared<const SourceBinding>(recorded_binding(deliveries)), source, *engine, metrics,
      connector::IdempotencyMode::kAuto,
      {.poll_timeout = 200ms, .idle_backoff = 10ms, .lag_sample_interval = 20ms, .max_batch = 10});
  std::set<double> lags;  // distinct values the gauge showed while the queue drained
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (executions() < 150 && std::chrono::steady_clock::now() < deadline) {
    auto s = rt.run_once();
    ASSERT_TRUE(s) << s.error().message;
    if (auto lag = metrics->gauge(metrics::kConnectorLag, {{"source", "events"}}))
      lags.insert(*lag);
  }
  ASSERT_EQ(executions(), 150);
  EXPECT_GE(lags.size(), 5u) << "the lag was not sampled mid-flow";
  const auto per_message = deliveries.per_message();
  EXPECT_EQ(per_message.size(), 150u);
  for (const auto& [id, n] : per_message) EXPECT_EQ(n, 1) << id << " was delivered " << n << "x";
  EXPECT_EQ(deliveries.highest_receive_count(), 1) << "a lag sample spent a receive";
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(rt.run_once());
    return queues_.depth(q.url) == QueueDepth{0, 0};
  })) << "every message acked";
  EXPECT_EQ(queues_.depth(q.dlq_url), (QueueDepth{0, 0}));
}

// A store outage: a commit that cannot reach PostgreSQL leaves its SQS
// messages unacked and not handed back (nothing is handed back that would
// only fail again), and intake pauses until the store answers. The messages
// in hand when the store went down reappear after their visibility timeout
// and are received once more after it is back: at most one extra receive
// each, and only for the batches in hand (commit_concurrency groups and one
// batch received ahead, each at most max_batch). Nothing is lost, nothing
// started twice, nothing reaches the DLQ (maxReceiveCount 3).
TEST_F(SqsCustodyTest, a_store_outage_costs_at_most_one_extra_receive_for_the_messages_in_hand) {
  log::LogCapture capture;
  harvest::testing::PrivateCluster pg("harvest-sqs-outage-pg");
  auto url = pg.start();
  ASSERT_TRUE(url) << url.error().describe();
  auto q = queues_.create_redriven("custody-outage", /*max_receive_count=*/3);
  (void)queues_.send(q.url, bodies(0, 150));
  Deliveries deliveries;
  constexpr size_t kBatch = 10;
  const connector::ConnectorRuntimeConfig config{
      .poll_timeout = 200ms, .idle_backoff = 10ms, .max_batch = kBatch};
  const auto runs = [&] { return pg.count("SELECT count(*) FROM harvest_workflow_executions"); };
  auto app = app_on(*url, q.url, deliveries, /*visibility_secs=*/2, config);
  app->start();
  ASSERT_TRUE(eventually([&] { return runs() >= 30; }, 30s));

  ASSERT_TRUE(pg.crash());
  (void)queues_.send(q.url, bodies(150, 300));
  // The outage itself: down 4 s, past the 2 s visibility of what was in hand
  // (not a synchronisation wait).
  std::this_thread::sleep_for(4s);
  ASSERT_TRUE(pg.start());
  ASSERT_TRUE(eventually([&] { return runs() == 300; }, 60s * harvest::testing::kSanitizerSlowdown))
      << runs() << " of 300";
  ASSERT_TRUE(eventually(
      [&] {
        return queues_.depth(q.url) == QueueDepth{0, 0};
      },
      30s))
      << "every message acked";
  app->stop();

  EXPECT_EQ(pg.count("SELECT count(DISTINCT workflow_id) FROM harvest_workflow_executions"), 300)
      << "nothing lost, nothing started twice";
  EXPECT_EQ(queues_.depth(q.dlq_url), (QueueDepth{0, 0})) << "no good message in the DLQ";
  EXPECT_GE(capture.count_containing("the store is unreachable"), 1u) << "the outage was seen";
  EXPECT_EQ(deliveries.per_message().size(), 300u);
  EXPECT_LE(deliveries.highest_receive_count(), 2) << "more than one extra receive";
  const size_t again = deliveries.received_again();
  std::cout << "[ figures  ] " << again << " of 300 messages received twice across the outage\n";
  EXPECT_LE(again, 3 * kBatch) << "extra receives beyond the batches in hand";
}

}  // namespace
}  // namespace harvest::sqs
