// CON-2, CON-3, CON-5, CON-8, CON-9, CON-10, CON-11, CON-13, CON-15, ENG-9:
// the connector runtime on MockSource against a real PostgreSQL.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "connector_fixture.hpp"
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/engine/admission.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;
using L = metrics::Labels;

TEST_F(ConnectorTest, chapter_example_two_deliveries_of_one_offset_make_one_execution) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 41, R"({"order_id":"A-1"})");
  source->push_kafka(0, 41, R"({"order_id":"A-1"})");  // deliberate redelivery
  auto summary = rt->run_once();
  ASSERT_TRUE(summary) << summary.error().message;
  EXPECT_EQ(summary->received, 2u);
  EXPECT_EQ(summary->acked, 2u) << "both deliveries settle";
  EXPECT_EQ(summary->retried, 0u);
  EXPECT_EQ(summary->dead_lettered, 0u);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'order-A-1'"),
            1);
  EXPECT_EQ(source->committed(0), 42);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "orders"}, {"outcome", "dispatched"}}) +
                metrics_->counter(metrics::kConnectorDispatched,
                                  L{{"source", "orders"}, {"outcome", "idempotent_replay"}}),
            2);
}

TEST_F(ConnectorTest, broker_starts_record_provenance_and_a_dedupe_claim) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(3, 7, order_json("A-7"));
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(text("SELECT start_source || ' ' || start_source_ref FROM harvest_workflow_executions"),
            "broker orders.placed:3:7");
  auto expected_key =
      DedupeKey::derive("orders", "", KafkaCoordinates{"orders.placed", 3, 7}).value();
  EXPECT_EQ(text("SELECT idempotency_key FROM harvest_start_idempotency"), expected_key);
}

TEST_F(ConnectorTest, a_crash_between_commit_and_ack_redelivers_to_the_same_executions) {
  auto source = std::make_shared<MockSource>("orders.placed");
  {
    auto rt = runtime(order_binding(), source);
    for (int o = 0; o < 5; ++o) source->push_kafka(0, o, order_json("C-" + std::to_string(o)));
    fault::arm("connector.after_dispatch_before_ack", fault::Action::kThrow);
    EXPECT_THROW((void)rt->run_once(), fault::InjectedCrash);
  }
  EXPECT_EQ(executions(), 5) << "the dispatches committed";
  EXPECT_TRUE(source->acked().empty()) << "nothing was acked before the crash";
  EXPECT_EQ(source->committed(0), std::nullopt);
  // The restarted consumer gets the same records again.
  auto rt = runtime(order_binding(), source);
  for (int o = 0; o < 5; ++o) source->push_kafka(0, o, order_json("C-" + std::to_string(o)));
  auto summary = rt->run_once();
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->acked, 5u);
  EXPECT_EQ(executions(), 5) << "redeliveries resolve to the same executions";
  EXPECT_EQ(source->committed(0), 5);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "orders"}, {"outcome", "idempotent_replay"}}),
            5);
}

TEST_F(ConnectorTest, max_in_flight_one_dispatches_in_broker_order) {
  std::mutex mu;
  std::vector<int64_t> completed;  // order in which mappings finished
  std::mt19937 rng(7);
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  b.map_json([&](const MessageCtx& ctx, Order o) -> MapResult {
     // Jitter: concurrent dispatches would finish out of order.
     std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
     std::lock_guard lock(mu);
     completed.push_back(std::get<KafkaCoordinates>(ctx.coordinates()).offset);
     return MappedMessage{"order-" + o.order_id, o};
   }).max_in_flight(1);
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(b, source);
  for (int o = 0; o < 40; ++o) source->push_kafka(0, o, order_json(std::to_string(o)));
  auto summary = rt->run_once();
  ASSERT_TRUE(summary);
  ASSERT_EQ(summary->acked, 40u);
  std::vector<int64_t> expected(40);
  for (int i = 0; i < 40; ++i) expected[i] = i;
  EXPECT_EQ(completed, expected);
  // The durable starts committed in broker order too.
  auto rows = db().exec(
      "SELECT input->>'order_id' AS id FROM harvest_workflow_executions ORDER BY "
      "created_at, (input->>'order_id')::int");
  ASSERT_TRUE(rows);
  std::vector<int64_t> committed;
  for (int i = 0; i < rows->rows(); ++i) committed.push_back(std::stoll(rows->get(i, "id")));
  EXPECT_EQ(committed, expected);
}

TEST_F(ConnectorTest, max_in_flight_n_never_exceeds_n_concurrent_dispatches) {
  std::atomic<int> now{0}, peak{0};
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  b.map_json([&](const MessageCtx&, Order o) -> MapResult {
     int n = ++now;
     int p = peak.load();
     while (n > p && !peak.compare_exchange_weak(p, n)) {
     }
     std::this_thread::sleep_for(5ms);
     --now;
     return MappedMessage{"order-" + o.order_id, o};
   }).max_in_flight(4);
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(b, source);
  for (int o = 0; o < 40; ++o) source->push_kafka(o % 3, o, order_json(std::to_string(o)));
  auto summary = rt->run_once();
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->acked, 40u);
  EXPECT_LE(peak.load(), 4);
  EXPECT_GE(peak.load(), 2) << "dispatch really is concurrent";
}

// CON-4: a runtime built directly refuses what the plugin refuses, with the
// same message, instead of dead-lettering every message later.
TEST_F(ConnectorTest, a_directly_built_runtime_refuses_forced_coordinates_on_a_throttled_target) {
  auto source = std::make_shared<MockSource>("orders.placed");
  try {
    ConnectorRuntime rt(std::make_shared<SourceBinding>(order_binding("orders", "throttled_order")),
                        source, *engine_, metrics_, IdempotencyMode::kBrokerCoordinates);
    FAIL() << "the runtime accepted forced BrokerCoordinates on a throttled workflow";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "binding 'orders' forces idempotency_mode(BrokerCoordinates) on workflow "
                  "'throttled_order'"),
              std::string::npos)
        << e.what();
  }
}

// CON-7, CON-9 backstop: a mapping function that throws is a rejection
// (strike-counted, handed back), and poison once the strikes reach the
// threshold; the batch around it is dispatched.
TEST_F(ConnectorTest, a_mapper_that_throws_is_strike_counted_then_dead_lettered) {
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  b.map_json([](const MessageCtx&, Order o) -> MapResult {
     if (o.order_id == "boom") throw std::runtime_error("mapper exploded");
     return MappedMessage{"order-" + o.order_id, o};
   }).poison_threshold(2);
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(b, source);
  source->push_sqs(order_json("boom"));
  source->push_sqs(order_json("A-1"));
  auto first = rt->run_once();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->acked, 1u);
  EXPECT_EQ(first->retried, 1u);
  EXPECT_TRUE(sink_->letters().empty()) << "one strike is not poison";
  ASSERT_TRUE(eventually([&] {
    (void)rt->run_once();
    return !sink_->letters().empty();
  }));
  auto letters = sink_->letters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].reason, "mapping_rejected");
  EXPECT_NE(letters[0].detail.find("mapping threw: mapper exploded"), std::string::npos)
      << letters[0].detail;
  EXPECT_EQ(letters[0].attempts, 2);
  EXPECT_EQ(executions(), 1);
}

TEST_F(ConnectorTest, undecodable_body_is_dead_lettered_at_once_and_acked) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 0, "{not json");
  source->push_kafka(0, 1, order_json("A-1"));
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(source->committed(0), 2) << "the poison message does not wedge the partition";
  auto letters = sink_->letters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].reason, "undecodable");
  EXPECT_EQ(letters[0].payload, "{not json");
  EXPECT_EQ(letters[0].coordinates, "orders.placed:0:0");
  EXPECT_EQ(letters[0].binding, "orders");
  EXPECT_EQ(letters[0].attempts, 1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered,
                              L{{"source", "orders"}, {"reason", "undecodable"}}),
            1);
}

// Hardening: a payload nested past the JSON depth limit (128) is undecodable,
// dead-lettered with that reason and its raw bytes, never parsed recursively
// (100,000 deep would overflow the stack).
TEST_F(ConnectorTest, payload_nested_past_the_depth_limit_is_dead_lettered_with_the_reason) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  const std::string deep =
      R"({"order_id":"D-1","x":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  source->push_kafka(0, 0, deep);
  source->push_kafka(0, 1, order_json("A-1"));
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  EXPECT_EQ(source->committed(0), 2);
  auto letters = sink_->letters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].reason, "undecodable");
  EXPECT_NE(letters[0].detail.find("128"), std::string::npos) << letters[0].detail;
  EXPECT_EQ(letters[0].payload, deep);
  EXPECT_EQ(executions(), 1);
}

TEST_F(ConnectorTest, permanent_start_rejection_is_dead_lettered_at_once) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 0, order_json("bad-input"));
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(sink_->letters()[0].reason, "start_rejected");
  EXPECT_NE(sink_->letters()[0].detail.find("fulfil_order"), std::string::npos);
  EXPECT_EQ(executions(), 0);
}

TEST_F(ConnectorTest, mapping_rejection_is_dead_lettered_on_the_threshold_th_rejection) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);  // default threshold 3
  source->push_sqs(order_json("reject-1"));
  for (int pass = 1; pass <= 2; ++pass) {
    auto s = rt->run_once();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->retried, 1u) << "pass " << pass;
    EXPECT_EQ(s->dead_lettered, 0u);
    EXPECT_EQ(source->abandoned().size(), static_cast<size_t>(pass))
        << "a strike-counted rejection is handed back promptly";
  }
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(sink_->letters()[0].reason, "mapping_rejected");
  EXPECT_EQ(sink_->letters()[0].attempts, 3);
  EXPECT_EQ(sink_->letters()[0].detail, "no such customer yet");
  EXPECT_EQ(source->acked().size(), 1u) << "dead-lettered, then deleted";
  EXPECT_EQ(source->pending(), 0u);
}

TEST_F(ConnectorTest, poison_threshold_zero_retries_rejections_but_still_dead_letters_undecodable) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto b = order_binding();
  b.poison_threshold(0);
  auto rt = runtime(b, source);
  source->push_sqs(order_json("reject-forever"));
  source->push_sqs("\x01\x02 not json");
  auto first = rt->run_once();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->dead_lettered, 1u);
  for (int pass = 0; pass < 6; ++pass) {
    auto s = rt->run_once();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->dead_lettered, 0u);
    EXPECT_EQ(s->retried, 1u);
  }
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(sink_->letters()[0].reason, "undecodable");
}

TEST_F(ConnectorTest, transient_start_failures_are_never_dead_lettered_nor_acked) {
  engine::EngineConfig config;
  config.pool_size = 1;
  config.pool_acquire_timeout = 100ms;
  config = engine_config(config);
  config.profile = engine::Profile::kTest;
  auto tight = engine::Engine::open(config, connector_workflows());
  ASSERT_TRUE(tight);
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  ConnectorRuntime rt(std::make_shared<const SourceBinding>(order_binding()), source, **tight,
                      metrics_);
  rt.with_dead_letter_sink(sink_);
  source->push_sqs(order_json("T-1"));
  {
    auto held = (*tight)->pool().acquire();  // the database is "down" for this runtime
    ASSERT_TRUE(held);
    for (int pass = 0; pass < 5; ++pass) {
      auto s = rt.run_once();
      ASSERT_TRUE(s);
      EXPECT_EQ(s->retried, 1u);
      EXPECT_EQ(s->dead_lettered, 0u);
      EXPECT_TRUE(source->acked().empty());
      EXPECT_TRUE(source->abandoned().empty()) << "no rushed retry: the broker paces it";
      source->expire_in_flight();  // the visibility timeout lapses
    }
  }
  EXPECT_TRUE(sink_->letters().empty());
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "orders"}, {"reason", "transient"}}),
            5);
  auto s = rt.run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(executions(), 1);
}

TEST_F(ConnectorTest, a_failing_dead_letter_write_is_downgraded_to_a_retry) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);
  sink_->fail_writes(true);
  source->push_sqs("garbage");
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 0u);
  EXPECT_EQ(s->retried, 1u);
  EXPECT_TRUE(source->acked().empty());
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "orders"}, {"reason", "dead_letter_failed"}}),
            1);
  sink_->fail_writes(false);
  source->expire_in_flight();
  s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  EXPECT_EQ(source->acked().size(), 1u);
}

TEST_F(ConnectorTest, the_default_sink_of_a_direct_runtime_fails_leaving_the_message_unacked) {
  log::LogCapture capture;
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source, {}, /*with_sink=*/false);
  source->push_sqs("garbage");
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->retried, 1u);
  EXPECT_EQ(s->dead_lettered, 0u);
  EXPECT_TRUE(source->acked().empty()) << "nothing is lost: the message stays on the broker";
  EXPECT_TRUE(capture.contains(
      {"no dead-letter sink", "with_dead_letter_sink(", "broker_native_dead_letter()"}));
}

TEST_F(ConnectorTest, postgres_sink_dead_lettering_the_same_message_twice_leaves_one_row) {
  PostgresDeadLetterSink pg(engine_->pool());
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
  std::string raw("\x00\xff{bad", 6);
  source->push_kafka(0, 9, raw);
  source->push_kafka(0, 9, raw);
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 2u);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters"), 1);
  EXPECT_EQ(text("SELECT binding || '|' || stream || '|' || coordinates || '|' || reason || '|' || "
                 "attempts FROM harvest_connector_dead_letters"),
            "orders|orders.placed|orders.placed:0:9|undecodable|1");
  EXPECT_EQ(text("SELECT encode(payload, 'hex') FROM harvest_connector_dead_letters"),
            "00ff7b626164")
      << "the raw payload survives byte for byte";
  EXPECT_EQ(source->committed(0), 10);
}

TEST_F(ConnectorTest, throttled_target_defers_acks_and_dedupes_on_workflow_id) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto b = order_binding("throttled", "throttled_order");
  b.max_in_flight(1);  // deterministic: which message takes the one token
  auto rt = runtime(b, source);
  EXPECT_EQ(rt->idempotency_mode(), IdempotencyMode::kWorkflowId);
  for (int o = 0; o < 3; ++o) source->push_kafka(0, o, order_json("D-" + std::to_string(o)));
  source->push_kafka(0, 1, order_json("D-1"));  // a redelivery of a deferred message
  auto s = rt->run_once();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->acked, 4u);
  EXPECT_EQ(source->committed(0), 3);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_deferred_starts"), 2)
      << "the redelivery collapsed into the queued start";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "throttled"}, {"outcome", "deferred"}}),
            3);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "throttled"}, {"outcome", "dispatched"}}),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 0)
      << "no coordinate key on a deferred-admission workflow";
}

// CON-8's fallback beyond throttle: a debounced or batched target also
// falls back to workflow-id dedupe; every message is acked as deferred,
// redeliveries collapse into the pending admission, and no coordinate key
// is written.
TEST_F(ConnectorTest, debounced_and_batched_targets_fall_back_to_workflow_id_dedupe) {
  struct Case {
    const char* workflow;
    const char* table;
    long long rows;  // pending admissions after 3 orders of one id + a redelivery
  };
  for (const Case& c : {Case{"debounced_order", "harvest_debounce", 3},
                        Case{"batched_order", "harvest_batch_items", 3}}) {
    SCOPED_TRACE(c.workflow);
    auto source = std::make_shared<MockSource>("orders.placed");
    auto b = order_binding(std::string("b_") + c.workflow, c.workflow);
    auto rt = runtime(b, source);
    EXPECT_EQ(rt->idempotency_mode(), IdempotencyMode::kWorkflowId);
    for (int o = 0; o < 3; ++o) source->push_kafka(0, o, order_json("E-" + std::to_string(o)));
    source->push_kafka(0, 1, order_json("E-1"));  // a redelivery
    auto s = rt->run_once();
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->acked, 4u);
    EXPECT_EQ(source->committed(0), 3);
    EXPECT_EQ(executions(), 0) << "nothing is admitted before the window";
    EXPECT_EQ(scalar(std::string("SELECT count(*) FROM ") + c.table), c.rows);
    EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                                L{{"source", b.name()}, {"outcome", "deferred"}}),
              4);
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 0);
  }
}

// A batched target through a connector: a redelivered record joins its batch
// once, and a redelivery after the batch fired joins no later batch.
TEST_F(ConnectorTest, a_redelivery_never_puts_an_item_in_a_batch_twice) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding("batch", "batched_order"), source);
  for (int o = 0; o < 3; ++o) source->push_kafka(0, o, order_json("F-" + std::to_string(o)));
  source->push_kafka(0, 1, order_json("F-1"));
  ASSERT_TRUE(rt->run_once());
  ASSERT_TRUE(db().exec("UPDATE harvest_batch_items SET created_at = now() - interval '2 hours'"));
  auto fired = engine::admission::fire_due(engine_->pool(), engine_->workflows());
  ASSERT_TRUE(fired) << fired.error().message;
  EXPECT_EQ(*fired, 1);
  EXPECT_EQ(text("SELECT json_array_length(input)::text FROM harvest_workflow_executions"), "3");
  // The same records redelivered after the batch fired (a rebalance, say).
  source->push_kafka(0, 1, order_json("F-1"));
  source->push_kafka(0, 2, order_json("F-2"));
  source->push_kafka(0, 3, order_json("F-3"));
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_batch_items WHERE fired_execution IS NULL"), 1)
      << "only F-3 waits for the next batch";
}

// Counting once: when the ack fails after a dead-letter write, the pass
// reports those messages as retried (they will be redelivered), and the
// dispatched / dead-lettered counters count each message once, when its ack
// finally lands — not once per delivery.
TEST_F(ConnectorTest, a_failed_ack_after_a_dead_letter_write_counts_each_message_once) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 0, "{not json");
  source->push_kafka(0, 1, order_json("G-1"));
  source->fail_acks(true);
  auto failed = rt->run_once();
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->acked, 0u);
  EXPECT_EQ(failed->dead_lettered, 0u);
  EXPECT_EQ(failed->retried, 2u);
  EXPECT_EQ(sink_->letters().size(), 1u) << "the dead letter itself is durable";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              L{{"source", "orders"}, {"reason", "ack_failed"}}),
            2);
  EXPECT_EQ(metrics_->counter_total(metrics::kConnectorDeadLettered), 0);
  EXPECT_EQ(metrics_->counter_total(metrics::kConnectorDispatched), 0);

  source->fail_acks(false);
  source->push_kafka(0, 0, "{not json");  // the broker redelivers both
  source->push_kafka(0, 1, order_json("G-1"));
  auto redelivered = rt->run_once();
  ASSERT_TRUE(redelivered);
  EXPECT_EQ(redelivered->dead_lettered, 1u);
  EXPECT_EQ(redelivered->acked, 1u);
  EXPECT_EQ(source->committed(0), 2);
  EXPECT_EQ(sink_->letters().size(), 1u) << "the repeat dead-letter write is a no-op";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered,
                              L{{"source", "orders"}, {"reason", "undecodable"}}),
            1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "orders"}, {"outcome", "idempotent_replay"}}),
            1);
  EXPECT_EQ(metrics_->counter_total(metrics::kConnectorDispatched), 1);
  EXPECT_EQ(executions(), 1);
}

// A rewind inside the settled range (CON-6), on MockSource: the partition
// handed back and reset inside the settled range; the redelivered records
// are committed from their own position, never at the old, higher mark (a
// crash before they settle must not skip them).
TEST_F(ConnectorTest, a_reset_inside_the_settled_range_is_committed_from_the_new_position) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  for (int o = 0; o < 4; ++o) source->push_kafka(0, o, order_json("H-" + std::to_string(o)));
  ASSERT_TRUE(rt->run_once());
  ASSERT_EQ(source->committed(0), 4);
  source->reassign(0);  // handed back, reset to offset 1
  source->push_kafka(0, 1, order_json("H-1"));
  auto s = rt->run_once();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(source->committed(0), 2) << "committed at the new position, not re-acked at 4";
  EXPECT_EQ(executions(), 4) << "the redelivery is a replay";
}

// Stalls on revoked partitions (CON-7), on MockSource: a stalled partition
// this consumer no longer owns is forgotten instead of rebuilding the
// consumer; the same stall on an owned partition is reported.
TEST_F(ConnectorTest, a_stall_on_a_revoked_partition_does_not_rebuild_the_consumer) {
  for (bool revoked : {false, true}) {
    SCOPED_TRACE(revoked ? "revoked" : "owned");
    auto source = std::make_shared<MockSource>("orders.placed");
    auto b = order_binding(revoked ? "revoked" : "owned");
    b.poison_threshold(0);  // the head is rejected forever
    ConnectorRuntimeConfig cfg;
    cfg.stall_threshold = 3;
    auto rt = runtime(b, source, cfg);
    source->push_kafka(0, 0, order_json("reject-head"));
    for (int o = 1; o <= 5; ++o) source->push_kafka(0, o, order_json("J-" + std::to_string(o)));
    if (revoked) source->revoke(0);
    auto s = rt->run_once();
    if (revoked) {
      EXPECT_TRUE(s) << "a revoked partition cannot stall this consumer";
    } else {
      ASSERT_FALSE(s);
      EXPECT_EQ(s.error().kind, ConnectorErrorKind::kStalled);
    }
  }
}

TEST_F(ConnectorTest, metrics_labels_are_bounded) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 100, order_json("M-1"));
  source->push_kafka(0, 100, order_json("M-1"));
  source->push_kafka(0, 101, "nope");
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "orders"}, {"outcome", "dispatched"}}),
            1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "orders"}, {"outcome", "idempotent_replay"}}),
            1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered,
                              L{{"source", "orders"}, {"reason", "undecodable"}}),
            1);
  std::string exec_id = text("SELECT id FROM harvest_workflow_executions");
  for (const auto& [name, labels] : metrics_->series()) {
    for (const auto& [k, v] : labels) {
      EXPECT_TRUE(k == "source" || k == "outcome" || k == "reason" || k == "workflow")
          << name << " has label " << k;
      EXPECT_EQ(v.find("100"), std::string::npos) << name << " carries an offset";
      EXPECT_EQ(v.find("conn:"), std::string::npos) << name << " carries a key";
      EXPECT_EQ(v.find(exec_id), std::string::npos) << name << " carries an execution id";
    }
  }
}

TEST_F(ConnectorTest, sqs_redelivery_of_one_message_id_resolves_to_one_execution) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);
  source->push_sqs(order_json("S-1"), {}, "msg-1");
  source->push_sqs(order_json("S-1"), {}, "msg-1");
  source->push_sqs(order_json("S-1"), {}, "msg-2");  // a genuine re-publish: a new message
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 3u);
  EXPECT_EQ(executions(), 1) << "workflow-id dedupe still collapses the re-publish here";
  // The run holds msg-1's key; msg-2's start resolved to it by workflow id
  // and records no key of its own (schema v2), so its redelivery resolves
  // the same way.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 1);
  source->push_sqs(order_json("S-1"), {}, "msg-2");
  s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(executions(), 1);
}

TEST_F(ConnectorTest, message_ctx_exposes_key_headers_and_coordinates) {
  std::optional<std::string> seen_key, seen_header;
  std::optional<std::string_view> bad_key;
  auto b = SourceBinding::starts("raw", "orders.placed", "fulfil_order");
  b.map_raw([&](const MessageCtx& ctx, std::string_view raw) -> MapResult {
    if (ctx.key_str()) seen_key = std::string(*ctx.key_str());
    if (auto h = ctx.header("tenant")) seen_header = std::string(*h);
    if (std::get<KafkaCoordinates>(ctx.coordinates()).offset == 2) bad_key = ctx.key_str();
    return MappedMessage{"order-" + std::string(raw), engine::Json{{"order_id", std::string(raw)}}};
  });
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(b, source);
  source->push_kafka(0, 1, "K1", std::string("device-9"), {{"tenant", "acme"}});
  source->push_kafka(0, 2, "K2", std::string("\xff\xfe", 2));
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(seen_key, "device-9");
  EXPECT_EQ(seen_header, "acme");
  EXPECT_EQ(bad_key, std::nullopt) << "key_str is absent for a key that is not UTF-8";
}

// signals_with_start("telemetry", "device-telemetry", "device_session",
// "reading"), each reading keyed to its device's entity "device-<id>".
SourceBinding telemetry_binding() {
  auto b = SourceBinding::signals_with_start("telemetry", "device-telemetry", "device_session",
                                             "reading");
  b.map_json([](const MessageCtx&, engine::Json r) -> MapResult {
    return MappedMessage{"device-" + r.at("device_id").get<std::string>(), r};
  });
  return b;
}

TEST_F(ConnectorTest, signals_with_start_makes_one_run_per_entity_with_every_reading) {
  auto b = telemetry_binding();
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  auto rt = runtime(b, source);
  for (int i = 0; i < 12; ++i) {
    source->push_sqs(engine::Json{{"device_id", std::to_string(i % 3)}, {"seq", i}}.dump());
  }
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 12u);
  EXPECT_EQ(executions(), 3);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e ON "
                     "e.id = s.execution_id WHERE e.workflow_id = $1 AND s.name = 'reading'",
                     {"device-" + std::to_string(d)}),
              4);
  }
  // Provenance: only the fresh start records it; later signals leave it alone.
  auto first_refs = db().exec(
      "SELECT workflow_id, start_source, start_source_ref FROM harvest_workflow_executions");
  ASSERT_TRUE(first_refs);
  for (int i = 0; i < first_refs->rows(); ++i) {
    EXPECT_EQ(first_refs->get(i, "start_source"), "broker");
    EXPECT_TRUE(first_refs->get(i, "start_source_ref").starts_with("mock://device-telemetry#"));
  }
  std::string before = text(
      "SELECT start_source_ref FROM harvest_workflow_executions WHERE "
      "workflow_id = 'device-0'");
  source->push_sqs(engine::Json{{"device_id", "0"}, {"seq", 99}}.dump(), {}, "late-reading");
  ASSERT_TRUE(rt->run_once());
  EXPECT_EQ(text("SELECT start_source_ref FROM harvest_workflow_executions WHERE workflow_id = "
                 "'device-0'"),
            before);
  // Redelivered signal: deduped by its coordinates.
  source->push_sqs(engine::Json{{"device_id", "0"}, {"seq", 99}}.dump(), {}, "late-reading");
  auto again = rt->run_once();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->acked, 1u);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 13);
}

TEST_F(ConnectorTest, broker_native_dead_letter_hands_poison_back_without_a_harvest_row) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  source->dead_letter_destination("arn:aws:sqs:us-east-1:000000000000:orders-dlq");
  auto b = order_binding();
  b.broker_native_dead_letter();
  auto rt = runtime(b, source);
  source->push_sqs("not json");
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->dead_lettered, 1u);
  EXPECT_TRUE(sink_->letters().empty());
  ASSERT_EQ(source->abandoned().size(), 1u) << "handed back: visibility 0, the redrive counts it";
  EXPECT_TRUE(source->acked().empty());
}

// Broker-native dead letters (CON-10): a message the broker's redrive
// policy owns is one dead letter, counted on the hand-back that reaches
// maxReceiveCount; the hand-backs before it are retries (they were counted
// as dead letters each time).
TEST_F(ConnectorTest, a_broker_native_dead_letter_is_counted_once_at_max_receive_count) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  source->dead_letter_destination("arn:aws:sqs:us-east-1:000000000000:orders-dlq");
  source->redrive_max_receives(3);
  auto b = order_binding();
  b.broker_native_dead_letter();
  auto rt = runtime(b, source);
  source->push_sqs("not json");
  const L undecodable{{"source", "orders"}, {"reason", "undecodable"}};
  for (int receive = 1; receive <= 3; ++receive) {
    SCOPED_TRACE(receive);
    auto s = rt->run_once();
    ASSERT_TRUE(s);
    ASSERT_EQ(s->received, 1u);
    EXPECT_EQ(s->dead_lettered, receive == 3 ? 1u : 0u);
    EXPECT_EQ(s->retried, receive == 3 ? 0u : 1u);
    EXPECT_EQ(metrics_->counter(metrics::kConnectorDeadLettered, undecodable),
              receive == 3 ? 1 : 0);
    EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried, undecodable),
              receive == 3 ? 2 : receive);
  }
  EXPECT_EQ(source->abandoned().size(), 3u);
}

}  // namespace
}  // namespace harvest::connector::testing

namespace harvest::connector::testing {
namespace {

TEST_F(ConnectorTest, a_binary_poison_body_is_dead_lettered_in_postgres_byte_for_byte) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  rt->with_dead_letter_sink(std::make_shared<PostgresDeadLetterSink>(engine_->pool()));
  std::string latin1("caf\xe9 \xff\xfe not json", 16);
  source->push_kafka(0, 0, latin1);
  auto s = rt->run_once();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->dead_lettered, 1u) << "the parser's error quotes raw bytes; the row must still land";
  EXPECT_EQ(s->retried, 0u);
  EXPECT_EQ(source->committed(0), 1);
  EXPECT_EQ(text("SELECT encode(payload, 'hex') FROM harvest_connector_dead_letters"),
            "636166e920fffe206e6f74206a736f6e");
}

// Entities outlive their runs. With the default reuse policy a reading for
// a device whose session ended starts the next session run; a redelivery of
// what the ended run got is a replay, not a second delivery.
TEST_F(ConnectorTest, a_reading_for_an_entity_whose_run_ended_starts_its_next_run) {
  auto b = telemetry_binding();
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  auto rt = runtime(b, source);
  source->push_sqs(R"({"device_id":"7","c":1})", {}, "m-1");
  ASSERT_TRUE(rt->run_once());
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET status = 'completed', "
                "completed_at = now()"));
  source->push_sqs(R"({"device_id":"7","c":1})", {}, "m-1");  // redelivery: still a replay
  source->push_sqs(R"({"device_id":"7","c":2})", {}, "m-2");  // new reading: next session
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 2u);
  EXPECT_EQ(s->dead_lettered, 0u);
  EXPECT_TRUE(sink_->letters().empty());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'device-7'"),
            2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e ON "
                   "e.id = s.execution_id WHERE e.run_no = 2 AND s.payload->>'c' = '2'"),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 2) << "m-1 delivered once only";
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              L{{"source", "telemetry"}, {"outcome", "idempotent_replay"}}),
            1);
}

// With workflow_id_reuse(kReject) the same reading is refused: dead-lettered
// with the reason, never dropped.
TEST_F(ConnectorTest, a_reject_binding_dead_letters_a_signal_for_an_ended_entity_run) {
  auto b = telemetry_binding();
  b.workflow_id_reuse(engine::WorkflowIdReuse::kReject);
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  auto rt = runtime(b, source);
  source->push_sqs(R"({"device_id":"7","c":1})", {}, "m-1");
  ASSERT_TRUE(rt->run_once());
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET status = 'completed', "
                "completed_at = now()"));
  source->push_sqs(R"({"device_id":"7","c":1})", {}, "m-1");  // redelivery: still a replay
  source->push_sqs(R"({"device_id":"7","c":2})", {}, "m-2");  // refused by policy
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(s->dead_lettered, 1u);
  ASSERT_EQ(sink_->letters().size(), 1u);
  EXPECT_EQ(sink_->letters()[0].reason, "start_rejected");
  EXPECT_NE(sink_->letters()[0].detail.find("accepts no more signals"), std::string::npos);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 1);
}

}  // namespace
}  // namespace harvest::connector::testing

namespace harvest::connector::testing {
namespace {

// An entity workflow with a typed input. A binding whose default start
// input ({}) the type refuses is refused at construction, naming the fix;
// with the mapper's start input, the first message starts the run with it
// (nothing dead-lettered).
SourceBinding typed_binding() {
  auto b =
      SourceBinding::signals_with_start("typed", "device-telemetry", "typed_session", "reading");
  b.map_json([](const MessageCtx&, engine::Json r) -> MapResult {
    const std::string id = r.at("device_id").get<std::string>();
    return MappedMessage{"device-" + id, r, engine::Json{{"device_id", id}}};
  });
  return b;
}

TEST_F(ConnectorTest, typed_entity_input_is_refused_at_construction_without_a_start_input) {
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  try {
    auto rt = runtime(typed_binding(), source);
    FAIL() << "a binding starting typed_session with {} must be refused";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("binding 'typed' would start runs of workflow 'typed_session' with the "
                       "input {}"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(".start_input_from_mapper()"), std::string::npos) << msg;
  }
}

TEST_F(ConnectorTest, typed_entity_runs_start_with_the_mappers_input) {
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  auto b = typed_binding();
  b.start_input_from_mapper();
  auto rt = runtime(b, source);
  source->push_sqs(engine::Json{{"device_id", "7"}, {"celsius", 21.5}}.dump());
  source->push_sqs(engine::Json{{"device_id", "7"}, {"celsius", 22.0}}.dump());
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 2u);
  EXPECT_EQ(s->dead_lettered, 0u);
  EXPECT_EQ(executions(), 1);
  EXPECT_EQ(text("SELECT input::jsonb::text FROM harvest_workflow_executions"),
            R"({"device_id": "7"})");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 2);
  EXPECT_TRUE(sink_->letters().empty());
}

TEST_F(ConnectorTest, typed_entity_binding_may_name_a_default_start_input) {
  auto source = std::make_shared<MockSource>("device-telemetry", MockSource::Kind::kRedelivering);
  auto b =
      SourceBinding::signals_with_start("typed", "device-telemetry", "typed_session", "reading");
  b.map_json([](const MessageCtx&, engine::Json r) -> MapResult {
     return MappedMessage{"device-" + r.at("device_id").get<std::string>(), r};
   }).entity_start_input(engine::Json{{"device_id", "unassigned"}});
  auto rt = runtime(b, source);
  source->push_sqs(engine::Json{{"device_id", "8"}}.dump());
  auto s = rt->run_once();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->acked, 1u);
  EXPECT_EQ(text("SELECT input->>'device_id' FROM harvest_workflow_executions"), "unassigned");
}

}  // namespace
}  // namespace harvest::connector::testing
