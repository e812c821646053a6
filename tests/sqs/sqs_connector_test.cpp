// SQS-1 … SQS-4 with CON-4, CON-8, CON-9, CON-10, CON-13: SqsSource under the
// connector runtime and the plugin, against the real SQS-compatible server
// (ElasticMQ) and a real PostgreSQL. Each test makes its own queues.
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "support/pg_fixture.hpp"
#include "test_queues.hpp"
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/sqs/sqs_source.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::sqs {
namespace {

using connector::ConnectorRuntime;
using connector::ConnectorRuntimeConfig;
using connector::MappedMessage;
using connector::MapResult;
using connector::MessageCtx;
using connector::PassSummary;
using connector::SourceBinding;
using connector::SqsCoordinates;
using engine::Json;
using testing::QueueDepth;
using L = metrics::Labels;
using namespace std::chrono_literals;

// ingest(any JSON): the starts target, returns its input.
// device_session: the entity target; gathers every `reading` signal until
// none arrives for 500 ms and returns them in the order it received them.
engine::WorkflowRegistry sqs_workflows() {
  engine::WorkflowRegistry r;
  r.add("ingest", [](engine::WorkflowContext&, Json in) { return in; });
  r.add("device_session", [](engine::WorkflowContext& ctx, Json) {
    Json readings = Json::array();
    while (auto reading = ctx.wait_signal("reading", 500ms)) readings.push_back(*reading);
    return readings;
  });
  return r;
}

// starts("events", "events", "ingest"): a JSON body {"id": ...} starts run
// "event-<id>" with the body as input; anything else is undecodable.
SourceBinding event_binding(std::string name = "events") {
  auto b = SourceBinding::starts(std::move(name), "events", "ingest");
  b.map_json([](const MessageCtx&, Json body) -> MapResult {
    return MappedMessage{"event-" + body.at("id").get<std::string>(), body};
  });
  return b;
}

std::string event_json(int id) {
  return Json{{"id", std::to_string(id)}}.dump();
}

// Polling fast enough for tests: a 200 ms poll_timeout long-polls SQS for 1 s.
ConnectorRuntimeConfig quick_config() {
  return {.poll_timeout = 200ms, .idle_backoff = 10ms, .max_batch = 10};
}

PassSummary& operator+=(PassSummary& total, const PassSummary& s) {
  total.received += s.received;
  total.acked += s.acked;
  total.retried += s.retried;
  total.dead_lettered += s.dead_lettered;
  return total;
}

class SqsConnectorTest : public harvest::testing::PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (HasFatalFailure()) return;
    metrics_ = std::make_shared<metrics::RecordingMetrics>();
    engine::EngineConfig config;
    config.metrics = metrics_;
    engine_ = open_engine(sqs_workflows(), config);
    ASSERT_TRUE(engine_);
    sink_ = std::make_shared<connector::PostgresDeadLetterSink>(engine_->pool());
  }
  void TearDown() override {
    fault::disarm_all();
    engine_.reset();
    PgTest::TearDown();
  }

  // A source on `queue` over the shared client, stream "events".
  std::shared_ptr<SqsSource> source_on(const std::string& queue, int visibility_secs = 30) {
    return std::make_shared<SqsSource>(
        queues_.client(),
        SqsSourceConfig(queue).stream("events").visibility_timeout_secs(visibility_secs));
  }
  // Config for SqsSource::connect against the test server.
  SqsSourceConfig connect_config(const std::string& queue) {
    return SqsSourceConfig(queue)
        .stream("events")
        .endpoint(queues_.endpoint())
        .region("us-east-1")
        .credentials(queues_.credentials());
  }
  // A runtime built directly over `engine` with the Postgres dead-letter sink.
  std::unique_ptr<ConnectorRuntime> runtime(const SourceBinding& binding,
                                            std::shared_ptr<connector::EventSource> source,
                                            ConnectorRuntimeConfig config = quick_config(),
                                            engine::Engine* engine = nullptr) {
    auto rt = std::make_unique<ConnectorRuntime>(
        std::make_shared<const SourceBinding>(binding), std::move(source),
        engine ? *engine : *engine_, metrics_, connector::IdempotencyMode::kAuto, config);
    rt->with_dead_letter_sink(sink_);
    return rt;
  }
  // Arms the fault point between the durable commit and the ack, then runs
  // passes until it fires (the consumer "dies" there). Returns whether it did.
  static bool crash_after_commit(ConnectorRuntime& rt) {
    fault::arm("connector.after_dispatch_before_ack", fault::Action::kThrow);
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        auto s = rt.run_once();
        EXPECT_TRUE(s) << s.error().message;
        if (!s) return false;
      } catch (const fault::InjectedCrash&) {
        return true;
      }
    }
    return false;
  }
  // Runs passes until the summed summary satisfies `done` or `timeout` passes.
  PassSummary passes_until(ConnectorRuntime& rt,
                           const std::function<bool(const PassSummary&)>& done,
                           std::chrono::milliseconds timeout = 20s) {
    PassSummary total;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done(total) && std::chrono::steady_clock::now() < deadline) {
      auto s = rt.run_once();
      EXPECT_TRUE(s) << s.error().message;
      if (!s) break;
      total += *s;
    }
    return total;
  }
  plugin::HarvestPlugin plugin() {
    plugin::HarvestPlugin p;
    engine::EngineConfig config;
    config = engine_config(config);
    config.profile = engine::Profile::kTest;
    p.engine_config(config)
        .workflows(sqs_workflows())
        .metrics(metrics_)
        .start_idempotency_window(std::chrono::hours(48));
    return p;
  }
  static std::string refusal_of(plugin::HarvestPlugin p) {
    try {
      (void)p.build();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  std::string dedupe_key(const std::string& binding, const std::string& queue,
                         const std::string& message_id) {
    return connector::DedupeKey::derive(binding, "", SqsCoordinates{queue, message_id, ""}).value();
  }
  long long executions() { return scalar("SELECT count(*) FROM harvest_workflow_executions"); }
  long long harvest_dead_letters() {
    return scalar("SELECT count(*) FROM harvest_connector_dead_letters");
  }

  sqs::testing::TestQueues queues_;
  std::shared_ptr<metrics::RecordingMetrics> metrics_;
  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<connector::PostgresDeadLetterSink> sink_;
};

// Records what the mapper saw of each delivery, across dispatch threads.
struct Deliveries {
  mutable std::mutex mu;
  std::vector<std::pair<std::string, int>> seen;  // (MessageId, receive count)
  void record(const MessageCtx& ctx) {
    std::lock_guard lock(mu);
    seen.emplace_back(std::get<SqsCoordinates>(ctx.coordinates()).message_id, ctx.receive_count());
  }
  std::vector<std::pair<std::string, int>> all() const {
    std::lock_guard lock(mu);
    return seen;
  }
};

TEST_F(SqsConnectorTest, the_app_turns_50_messages_into_50_completed_executions_and_empties_queue) {
  auto queue = queues_.create("e2e");
  std::vector<std::string> bodies;
  for (int i = 0; i < 50; ++i) bodies.push_back(event_json(i));
  auto ids = queues_.send(queue, bodies);
  ASSERT_EQ(ids.size(), 50u);

  auto app = plugin()
                 .connector_with_config(event_binding(), source_on(queue), quick_config())
                 .worker(engine::WorkerConfig{.concurrency = 4, .poll_interval = 10ms})
                 .build();
  app->start();
  ASSERT_TRUE(eventually([&] {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'") ==
           50;
  }));
  ASSERT_TRUE(eventually([&] { return queues_.depth(queue).total() == 0; }))
      << ::testing::PrintToString(queues_.depth(queue));
  app->stop();

  EXPECT_EQ(executions(), 50);
  EXPECT_EQ(scalar("SELECT count(DISTINCT workflow_id) FROM harvest_workflow_executions"), 50);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE start_source = "
                   "'broker' AND start_source_ref LIKE $1",
                   {queue + "#%"}),
            50);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "events"}, {"outcome", "dispatched"}}),
            50);
  EXPECT_EQ(harvest_dead_letters(), 0);
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0}));
}

TEST_F(SqsConnectorTest,
       a_transient_dispatch_failure_stays_unacked_and_redelivers_after_visibility) {
  auto queue = queues_.create("transient");
  auto ids = queues_.send(queue, {event_json(1)});
  Deliveries deliveries;
  auto b = SourceBinding::starts("events", "events", "ingest");
  b.map_json([&](const MessageCtx& ctx, Json body) -> MapResult {
    deliveries.record(ctx);
    return MappedMessage{"event-" + body.at("id").get<std::string>(), body};
  });
  // An engine whose only connection the test holds: every start times out
  // acquiring it, the connector's "database is down".
  engine::EngineConfig config;
  config.pool_size = 1;
  config.pool_acquire_timeout = 100ms;
  config = engine_config(config);
  config.profile = engine::Profile::kTest;
  config.metrics = metrics_;
  auto tight = engine::Engine::open(config, sqs_workflows());
  ASSERT_TRUE(tight) << tight.error().message;
  auto rt = runtime(b, source_on(queue, /*visibility_secs=*/1), quick_config(), tight->get());
  {
    auto held = (*tight)->pool().acquire();
    ASSERT_TRUE(held) << held.error().message;
    auto failed = passes_until(*rt, [](const PassSummary& s) { return s.received > 0; });
    EXPECT_EQ(failed.received, 1u);
    EXPECT_EQ(failed.retried, 1u);
    EXPECT_EQ(failed.acked, 0u);
    EXPECT_EQ(failed.dead_lettered, 0u);
    // Not deleted and not handed back: still in flight until its visibility
    // timeout lapses (an abandon would have made it visible at once).
    EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 1}));
  }
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "events"}, {"reason", "transient"}}),
            1);
  EXPECT_EQ(executions(), 0);

  auto settled = passes_until(*rt, [](const PassSummary& s) { return s.acked > 0; });
  EXPECT_EQ(settled.acked, 1u);
  EXPECT_EQ(settled.retried, 0u);
  EXPECT_EQ(settled.dead_lettered, 0u);
  EXPECT_EQ(deliveries.all(), (std::vector<std::pair<std::string, int>>{{ids[0], 1}, {ids[0], 2}}))
      << "the same message, received a second time after its visibility timeout";
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "events"}, {"outcome", "dispatched"}}),
            1);
  EXPECT_EQ(harvest_dead_letters(), 0) << "a transient failure is never dead-lettered";
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0}));
}

TEST_F(SqsConnectorTest, a_redelivery_after_a_crash_between_commit_and_ack_is_the_same_execution) {
  auto queue = queues_.create("crash");
  auto ids = queues_.send(queue, {event_json(7)});
  Deliveries deliveries;
  // The workflow_id changes with every delivery, so only the coordinate
  // dedupe key (queue URL + MessageId) can recognise the redelivery.
  auto b = SourceBinding::starts("events", "events", "ingest");
  b.map_json([&](const MessageCtx& ctx, Json body) -> MapResult {
    deliveries.record(ctx);
    return MappedMessage{"event-7-delivery-" + std::to_string(ctx.receive_count()), body};
  });
  auto source = source_on(queue, /*visibility_secs=*/1);
  {
    auto rt = runtime(b, source);
    ASSERT_TRUE(crash_after_commit(*rt));
  }
  EXPECT_EQ(executions(), 1) << "the dispatch committed";
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 1})) << "but nothing was deleted";

  // The restarted consumer receives the same message once its visibility
  // timeout lapses.
  auto rt = runtime(b, source);
  auto s = passes_until(*rt, [](const PassSummary& s) { return s.acked > 0; });
  EXPECT_EQ(s.acked, 1u);
  EXPECT_EQ(deliveries.all(), (std::vector<std::pair<std::string, int>>{{ids[0], 1}, {ids[0], 2}}));
  EXPECT_EQ(executions(), 1) << "the redelivery resolved to the first execution";
  EXPECT_EQ(text("SELECT workflow_id FROM harvest_workflow_executions"), "event-7-delivery-1");
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "events"}, {"outcome", "idempotent_replay"}}),
            1);
  EXPECT_EQ(text("SELECT idempotency_key FROM harvest_start_idempotency"),
            dedupe_key("events", queue, ids[0]));
  EXPECT_EQ(text("SELECT start_source_ref FROM harvest_workflow_executions"), queue + "#" + ids[0]);
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0}));
  // Coordinate collisions: an SQS MessageId is never reused, so its key carries
  // no record fingerprint and a redelivery can never be taken for a collision.
  EXPECT_EQ(
      scalar("SELECT count(*) FROM harvest_workflow_executions WHERE key_fingerprint IS NULL"), 1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorCollisions, L{{"source", "events"}}), 0);
}

TEST_F(SqsConnectorTest, broker_native_dead_letter_moves_poison_to_the_redrive_dlq_not_postgres) {
  auto q = queues_.create_redriven("native", /*max_receive_count=*/2);
  auto poison_id = queues_.send(q.url, {"not json"})[0];
  (void)queues_.send(q.url, {event_json(1)});
  auto source = SqsSource::connect(connect_config(q.url));
  ASSERT_TRUE(source) << source.error().message;
  ASSERT_EQ((*source)->dead_letter_destination(), q.dlq_arn) << "the probe found the policy";

  auto app = plugin()
                 .connector_with_config(event_binding().broker_native_dead_letter(), *source,
                                        quick_config())
                 .build();
  app->start();
  // Handed back twice (receive counts 1 and 2); SQS moves it lazily, on the
  // receive after maxReceiveCount.
  ASSERT_TRUE(eventually([&] { return queues_.depth(q.dlq_url).visible == 1; }))
      << ::testing::PrintToString(queues_.depth(q.dlq_url));
  ASSERT_TRUE(eventually([&] { return executions() == 1; }));
  app->stop();

  auto moved = queues_.client()->receive_message({.queue_url = q.dlq_url, .wait_time_secs = 1});
  ASSERT_TRUE(moved) << moved.error().message;
  ASSERT_EQ(moved->size(), 1u);
  EXPECT_EQ((*moved)[0].message_id, poison_id);
  EXPECT_EQ((*moved)[0].body, "not json");
  EXPECT_EQ(harvest_dead_letters(), 0) << "the broker owns poison in this mode";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered,
                              L{{"source", "events"}, {"reason", "undecodable"}}),
            1)
      << "one message, one dead letter: counted on the hand-back that reaches maxReceiveCount";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "events"}, {"reason", "undecodable"}}),
            1)
      << "the first hand-back (receive 1 of 2) is a retry";
  EXPECT_EQ((*source)->redrive_max_receives(), 2) << "probed from the RedrivePolicy";
  EXPECT_EQ(queues_.depth(q.url), (QueueDepth{0, 0}));
}

TEST_F(SqsConnectorTest, broker_native_dead_letter_is_refused_at_build_without_a_redrive_policy) {
  auto plain = queues_.create("plain");
  const std::string refusal =
      "binding 'events' uses broker_native_dead_letter() but its source reports no dead-letter "
      "destination";
  // The synchronous constructor cannot probe and nothing is declared.
  auto unprobed =
      refusal_of(plugin().connector(event_binding().broker_native_dead_letter(), source_on(plain)));
  EXPECT_NE(unprobed.find(refusal), std::string::npos) << unprobed;
  // connect() probes: this queue really has no policy.
  auto probed = SqsSource::connect(connect_config(plain));
  ASSERT_TRUE(probed) << probed.error().message;
  auto probed_refusal =
      refusal_of(plugin().connector(event_binding().broker_native_dead_letter(), *probed));
  EXPECT_NE(probed_refusal.find(refusal), std::string::npos) << probed_refusal;
  // The constructor reports a destination only when one is declared.
  auto declared = std::make_shared<SqsSource>(
      queues_.client(), SqsSourceConfig(plain).stream("events").has_redrive_policy(true));
  EXPECT_EQ(refusal_of(plugin().connector(event_binding().broker_native_dead_letter(), declared)),
            "");
  // And with a real policy, connect()'s probe lets the same binding build.
  auto q = queues_.create_redriven("accepted", 2);
  auto redriven = SqsSource::connect(connect_config(q.url));
  ASSERT_TRUE(redriven) << redriven.error().message;
  EXPECT_EQ(refusal_of(plugin().connector(event_binding().broker_native_dead_letter(), *redriven)),
            "");
}

TEST_F(SqsConnectorTest, a_failed_redrive_probe_is_logged_and_broker_native_is_refused) {
  const std::string missing = queues_.missing_queue_url();
  log::LogCapture capture;
  auto source = SqsSource::connect(connect_config(missing));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_TRUE(capture.contains({missing, "RedrivePolicy", "QueueDoesNotExist"}))
      << ::testing::PrintToString(capture.messages());
  auto refusal =
      refusal_of(plugin().connector(event_binding().broker_native_dead_letter(), *source));
  EXPECT_NE(refusal.find("binding 'events' uses broker_native_dead_letter() but its source "
                         "reports no dead-letter destination"),
            std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("has_redrive_policy(true)"), std::string::npos) << "names the fix";
}

TEST_F(SqsConnectorTest, default_sink_records_poison_in_postgres_and_deletes_the_message) {
  auto queue = queues_.create("sink");
  auto poison_id = queues_.send(queue, {"not json"})[0];
  (void)queues_.send(queue, {event_json(1)});

  auto app =
      plugin().connector_with_config(event_binding(), source_on(queue), quick_config()).build();
  app->start();
  ASSERT_TRUE(eventually([&] { return harvest_dead_letters() == 1 && executions() == 1; }));
  ASSERT_TRUE(eventually([&] { return queues_.depth(queue).total() == 0; }))
      << ::testing::PrintToString(queues_.depth(queue));
  app->stop();

  auto row = db().exec(
      "SELECT binding, stream, coordinates, idempotency_key, reason, attempts, "
      "convert_from(payload, 'UTF8') AS payload FROM harvest_connector_dead_letters");
  ASSERT_TRUE(row) << row.error().message;
  ASSERT_EQ(row->rows(), 1);
  EXPECT_EQ(row->get(0, "binding"), "events");
  EXPECT_EQ(row->get(0, "stream"), "events");
  EXPECT_EQ(row->get(0, "coordinates"), queue + "#" + poison_id);
  EXPECT_EQ(row->get(0, "idempotency_key"), dedupe_key("events", queue, poison_id));
  EXPECT_EQ(row->get(0, "reason"), "undecodable");
  EXPECT_EQ(row->get(0, "attempts"), "1");
  EXPECT_EQ(row->get(0, "payload"), "not json");
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered,
                              L{{"source", "events"}, {"reason", "undecodable"}}),
            1);
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0})) << "deleted after the row";
}

TEST_F(SqsConnectorTest, lag_gauge_is_visible_plus_in_flight_messages) {
  auto queue = queues_.create("lag");
  (void)queues_.send(queue,
                     {event_json(1), event_json(2), event_json(3), event_json(4), event_json(5)});
  // Another consumer holds two messages in flight.
  auto held = queues_.client()->receive_message(
      {.queue_url = queue, .max_messages = 2, .visibility_timeout_secs = 120});
  ASSERT_TRUE(held) << held.error().message;
  ASSERT_EQ(held->size(), 2u);
  ASSERT_EQ(queues_.depth(queue), (QueueDepth{3, 2}));

  auto config = quick_config();
  // Also the sample's budget: generous, so a slow sample is never abandoned.
  config.lag_sample_interval = 2s;
  auto rt = runtime(event_binding(), source_on(queue), config);
  auto gauge = [&] { return metrics_->gauge(metrics::kConnectorLag, {{"source", "events"}}); };
  // The first pass samples before it receives: 3 visible + 2 in flight.
  auto first = rt->run_once();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(gauge(), 5);
  (void)passes_until(*rt, [&](const PassSummary& s) { return first->acked + s.acked >= 3; });
  EXPECT_EQ(executions(), 3);
  // Nothing is visible any more, but the two in flight are still owed.
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(rt->run_once());
    return gauge() == 2;
  })) << gauge().value_or(-1);
  for (const auto& m : *held)
    ASSERT_TRUE(queues_.client()->delete_message(queue, m.receipt_handle));
  ASSERT_TRUE(eventually([&] {
    EXPECT_TRUE(rt->run_once());
    return gauge() == 0;
  })) << gauge().value_or(-1);
}

TEST_F(SqsConnectorTest, signals_with_start_gathers_each_devices_readings_into_one_run) {
  auto queue = queues_.create("telemetry");
  std::vector<std::string> bodies;
  for (int i = 0; i < 30; ++i)
    bodies.push_back(Json{{"device_id", std::to_string(i % 3)}, {"seq", i}}.dump());
  (void)queues_.send(queue, bodies);
  auto b = SourceBinding::signals_with_start("telemetry", "events", "device_session", "reading");
  b.map_json([](const MessageCtx&, Json r) -> MapResult {
    return MappedMessage{"device-" + r.at("device_id").get<std::string>(), r};
  });
  auto rt = runtime(b, source_on(queue));
  auto s = passes_until(*rt, [](const PassSummary& s) { return s.acked >= 30; });
  EXPECT_EQ(s.acked, 30u);
  EXPECT_EQ(s.retried, 0u);
  EXPECT_EQ(executions(), 3);
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0}));

  // Every reading is staged before the runs start, so each run gathers all
  // of its device's readings before its idle wait ends it.
  engine::Worker worker(*engine_, {.concurrency = 3, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(eventually([&] {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'") ==
           3;
  }));
  worker.stop();
  for (int d = 0; d < 3; ++d) {
    const std::string workflow_id = "device-" + std::to_string(d);
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e "
                     "ON e.id = s.execution_id WHERE e.workflow_id = $1 AND s.name = 'reading'",
                     {workflow_id}),
              10);
    auto id = engine_->find_execution("device_session", workflow_id);
    ASSERT_TRUE(id && *id) << workflow_id;
    auto run = engine_->get_execution(**id);
    ASSERT_TRUE(run) << run.error().message;
    std::set<int> seqs;
    for (const auto& reading : run->output) {
      EXPECT_EQ(reading.at("device_id"), std::to_string(d));
      seqs.insert(reading.at("seq").get<int>());
    }
    std::set<int> expected;
    for (int i = d; i < 30; i += 3) expected.insert(i);
    EXPECT_EQ(run->output.size(), 10u) << workflow_id << ": " << run->output.dump();
    EXPECT_EQ(seqs, expected) << workflow_id;
  }
}

// Entities outlive their runs, on the real SQS server: the consumer is down
// longer than the sessions' idle time, every session ends, and the readings
// that arrive meanwhile open each device's next session — none is
// dead-lettered. A reading whose delete was lost in a crash after its commit
// is redelivered after its session ended: it is a replay, not a reading of
// the next session.
TEST_F(SqsConnectorTest, readings_after_the_sessions_ended_open_the_next_sessions_and_dedupe) {
  auto queue = queues_.create("sessions");
  auto reading = [](int device, int seq) {
    return Json{{"device_id", std::to_string(device)}, {"seq", seq}}.dump();
  };
  auto b = SourceBinding::signals_with_start("telemetry", "events", "device_session", "reading");
  b.map_json([](const MessageCtx&, Json r) -> MapResult {
    return MappedMessage{"device-" + r.at("device_id").get<std::string>(), r};
  });
  auto source = source_on(queue, /*visibility_secs=*/1);
  auto completed = [&] {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'");
  };
  auto run_sessions = [&](long long until_completed) {
    engine::Worker worker(*engine_, {.concurrency = 2, .poll_interval = 10ms});
    worker.start();
    EXPECT_TRUE(eventually([&] { return completed() == until_completed; }, 20s));
    worker.stop();
  };

  // First sessions: 2 devices, one crash after the commit of the first pass
  // leaves its messages undeleted (they come back after the session ends).
  (void)queues_.send(queue, {reading(0, 1), reading(1, 2)});
  {
    auto rt = runtime(b, source);
    ASSERT_TRUE(crash_after_commit(*rt));
  }
  const long long staged = scalar("SELECT count(*) FROM harvest_signals");
  ASSERT_GE(staged, 1);
  // The consumer stays down; the sessions reach their idle end.
  run_sessions(executions());

  // Readings sent during the outage, then the consumer restarts: the
  // undeleted first readings come back (replays) and the new ones start the
  // next sessions.
  (void)queues_.send(queue, {reading(0, 3), reading(1, 4), reading(0, 5)});
  auto rt = runtime(b, source);
  auto s = passes_until(*rt, [&](const PassSummary& p) {
    return queues_.depth(queue) == QueueDepth{0, 0} && p.acked >= 3;
  });
  EXPECT_EQ(s.dead_lettered, 0u);
  EXPECT_EQ(harvest_dead_letters(), 0);
  EXPECT_EQ(queues_.depth(queue), (QueueDepth{0, 0}));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 5)
      << "every reading delivered exactly once across the runs";
  // Normally both first readings were in the crashed pass (staged == 2); a
  // device whose first reading came later simply had no earlier session.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE run_no = 2"), staged)
      << "each device that had a session got its next one";
  run_sessions(executions());
  // Every reading is accounted for in some session's output.
  std::set<int> seqs;
  auto rows = db().exec("SELECT output::text AS o FROM harvest_workflow_executions");
  ASSERT_TRUE(rows);
  for (int i = 0; i < rows->rows(); ++i) {
    for (const auto& r : Json::parse(rows->get(i, "o"))) seqs.insert(r.at("seq").get<int>());
  }
  EXPECT_EQ(seqs, (std::set<int>{1, 2, 3, 4, 5}));
}

TEST_F(SqsConnectorTest, message_attributes_are_readable_through_ctx_header) {
  auto queue = queues_.create("attrs");
  auto b = SourceBinding::starts("events", "events", "ingest");
  b.map_json([](const MessageCtx& ctx, Json body) -> MapResult {
    auto device = ctx.header("device");
    if (!device) return std::unexpected("no device attribute");
    body["firmware"] = std::string(ctx.header("firmware").value_or("?"));
    body["has_blob_header"] = ctx.header("blob").has_value();
    body["has_absent_header"] = ctx.header("absent").has_value();
    return MappedMessage{"device-" + std::string(*device), body};
  });
  (void)queues_.send(queue,
                     std::vector<OutgoingMessage>{
                         {.body = R"({"reading":21.5})",
                          .message_attributes = {
                              {.name = "device", .data_type = "String", .string_value = "d-7"},
                              {.name = "firmware", .data_type = "Number", .string_value = "3"},
                              {.name = "blob", .data_type = "Binary", .binary_value = "AAEC"}}}});
  auto rt = runtime(b, source_on(queue));
  auto s = passes_until(*rt, [](const PassSummary& s) { return s.acked > 0; });
  EXPECT_EQ(s.acked, 1u);
  auto input = Json::parse(
      text("SELECT input::text FROM harvest_workflow_executions WHERE workflow_id = 'device-d-7'"));
  EXPECT_EQ(input, (Json{{"reading", 21.5},
                         {"firmware", "3"},
                         {"has_blob_header", false},
                         {"has_absent_header", false}}));
}

TEST_F(SqsConnectorTest, two_bindings_on_one_queue_are_refused_naming_the_queue_url) {
  auto queue = queues_.create("shared");
  auto refusal = refusal_of(plugin()
                                .connector(event_binding("first"), source_on(queue))
                                .connector(event_binding("second"), source_on(queue)));
  EXPECT_NE(
      refusal.find("bindings 'first' and 'second' consume the same subscription (" + queue + ")"),
      std::string::npos)
      << refusal;
}

}  // namespace
}  // namespace harvest::sqs
