// KafkaSource end to end through the connector runtime and the plugin, on a
// real broker and a real PostgreSQL (KAF-2..KAF-6, CON-4..CON-7, CON-14):
// every record becomes exactly one execution and the group's commit reaches
// the log end; replicas rebalancing mid-stream; a wedged head rebuilt by
// recover(); `latest` across rebuilds; the lag gauge from two replicas; the
// plugin's build refusals for Kafka subscriptions.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

#include "kafka_connector_fixture.hpp"
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::kafka::testing {
namespace {

using connector::ConnectorErrorKind;
using connector::ConnectorRuntime;
using connector::KafkaCoordinates;

const KafkaCoordinates& coords(const connector::MessageCtx& ctx) {
  return std::get<KafkaCoordinates>(ctx.coordinates());
}

TEST_F(KafkaConnectorTest, plugin_turns_every_record_into_exactly_one_completed_run) {
  constexpr int kRecords = 200;
  constexpr int kPartitions = 4;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, kRecords, "e2e", produced);
  ASSERT_EQ(produced.refs.size(), static_cast<size_t>(kRecords));

  auto app = plugin()
                 .connector_with_config(binding("orders", topic), connect(config(group, topic)),
                                        quick_config())
                 .worker(engine::WorkerConfig{.concurrency = 4, .poll_interval = 20ms})
                 .metrics(metrics_)
                 .build();
  app->start();
  EXPECT_TRUE(eventually([&] { return completed() == kRecords; }, 60s))
      << completed() << " completed of " << executions() << " executions";
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end)
      << "the group's commit must reach the end offset of every partition";
  app->stop();

  std::vector<std::string> duplicates;
  EXPECT_EQ(execution_refs(&duplicates), produced.refs)
      << "each record starts one run, with its own coordinates as provenance";
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(executions(), kRecords);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE start_source = "
                   "'broker' AND output = to_jsonb('fulfilled ' || (input->>'order_id'))"),
            kRecords);
  EXPECT_EQ(claims(), kRecords);
  EXPECT_EQ(dispatched("orders", "dispatched"), kRecords);
}

// Holds every mapping while closed; opened by the test.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  int blocked = 0;

  void pass() {
    std::unique_lock lock(mu);
    if (!closed) return;
    ++blocked;
    cv.wait_for(lock, 60s, [&] { return !closed; });
    --blocked;
  }
  void close() {
    std::lock_guard lock(mu);
    closed = true;
  }
  void open() {
    {
      std::lock_guard lock(mu);
      closed = false;
    }
    cv.notify_all();
  }
  int waiting() {
    std::lock_guard lock(mu);
    return blocked;
  }
};

// Replica A is stopped mid-batch (its dispatches held) when replica B joins:
// the rebalance revokes A's partitions under its in-flight batch, whose acks
// are then dropped, and B (or A, re-assigned) redelivers from the last
// commit. Every redelivery must resolve to the existing execution.
TEST_F(KafkaConnectorTest, two_replicas_rebalancing_mid_stream_start_each_record_once) {
  constexpr int kRecords = 200;
  constexpr int kPartitions = 4;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, kRecords, "replica", produced);

  Gate gate;
  std::atomic<int> mapped{0};
  auto b = binding("orders", topic, [&](const connector::MessageCtx&, const Order&) {
    if (++mapped == kRecords / 4) gate.close();
    gate.pass();
    return std::optional<std::string>();
  });
  // Eager (range) assignment: B's arrival revokes all of A's partitions.
  auto cfg = config(group, topic).property("partition.assignment.strategy", "range");
  auto a_source = connect(cfg);
  auto b_source = connect(cfg);
  auto a = runtime(b, a_source, quick_config());
  auto b_runtime = runtime(b, b_source, quick_config());

  std::optional<Consumer> a_consumer(std::in_place, *a);
  ASSERT_TRUE(eventually([&] { return gate.waiting() > 0; }, 60s))
      << "replica A never reached the held batch";
  ASSERT_EQ(a_source->snapshot().owned.size(), static_cast<size_t>(kPartitions));
  const long long before_rebalance = executions();
  EXPECT_LT(before_rebalance, kRecords / 4);

  std::optional<Consumer> b_consumer(std::in_place, *b_runtime);
  ASSERT_TRUE(eventually(
      [&] {
        const auto a_owns = a_source->snapshot().owned.size();
        const auto b_owns = b_source->snapshot().owned.size();
        return a_owns > 0 && b_owns > 0 && a_owns + b_owns == kPartitions;
      },
      60s))
      << "the group did not split the partitions between the replicas";
  gate.open();

  EXPECT_TRUE(eventually([&] { return executions() == kRecords; }, 60s)) << executions();
  EXPECT_EQ(await_committed(group, topic, produced.end), produced.end);
  b_consumer.reset();
  a_consumer.reset();

  std::vector<std::string> duplicates;
  EXPECT_EQ(execution_refs(&duplicates), produced.refs);
  EXPECT_TRUE(duplicates.empty());
  EXPECT_EQ(claims(), kRecords);
  EXPECT_EQ(dispatched("orders", "dispatched"), kRecords)
      << "a redelivery dispatched a second start";
  // A's held batch was dispatched after its partitions were revoked, so its
  // acks were dropped and those records were delivered again.
  EXPECT_GT(dispatched("orders", "idempotent_replay"), 0);
  RecordProperty("idempotent_replays", static_cast<int>(dispatched("orders", "idempotent_replay")));
}

// CON-7 / KAF-3: one retried record wedges its partition (Kafka has no
// hand-back); the runtime sees a stalled prefix, recover() rebuilds the
// consumer, the record is redelivered from the last commit and dispatched,
// and the partition's commit moves on to the end.
// Entities outlive their runs, on the real broker: a reading committed to
// the engine but not to the group (crash between the two) is redelivered
// after its entity's run ended — a replay, not a reading of the next run —
// and a new reading for that entity starts its next run. Nothing is
// dead-lettered and the group's commit covers both records.
TEST_F(KafkaConnectorTest, an_entity_whose_run_ended_gets_a_next_run_and_a_redelivery_is_a_replay) {
  const auto topic = make_topic(1);
  const auto group = unique_name("g");
  auto b =
      connector::SourceBinding::signals_with_start("telemetry", topic, "device_session", "reading");
  b.map_json([](const connector::MessageCtx&, engine::Json r) -> connector::MapResult {
    return connector::MappedMessage{"device-" + r.at("device_id").get<std::string>(), r};
  });
  auto produce = [&](int seq) {
    auto offset = broker_->produce(
        topic, Record{.payload = engine::Json{{"device_id", "7"}, {"seq", seq}}.dump()});
    ASSERT_TRUE(offset) << offset.error().message;
  };
  produce(1);
  {
    auto source = connect(config(group, topic));
    auto rt = runtime(b, source, quick_config());
    fault::arm("connector.after_dispatch_before_ack", fault::Action::kThrow);
    bool crashed = false;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!crashed && std::chrono::steady_clock::now() < deadline) {
      try {
        (void)rt->run_once();
      } catch (const fault::InjectedCrash&) {
        crashed = true;
      }
    }
    ASSERT_TRUE(crashed);
  }
  ASSERT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 1);
  EXPECT_TRUE(committed(group, topic).empty()) << "the crash came before the offset commit";
  // The session ends while the consumer is down.
  ASSERT_TRUE(db().exec(
      "UPDATE harvest_workflow_executions SET status = 'completed', completed_at = now()"));
  produce(2);

  auto source = connect(config(group, topic));
  auto rt = runtime(b, source, quick_config());
  {
    Consumer consumer(*rt);
    EXPECT_EQ(await_committed(group, topic, {{0, 2}}), (std::map<int32_t, int64_t>{{0, 2}}));
  }
  EXPECT_TRUE(sink_->letters().empty());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 2) << "reading 1 delivered once";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'device-7'"),
            2);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals s JOIN harvest_workflow_executions e ON "
                   "e.id = s.execution_id WHERE e.run_no = 2 AND s.payload->>'seq' = '2'"),
            1);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorDispatched,
                              {{"source", "telemetry"}, {"outcome", "idempotent_replay"}}),
            1);
}

TEST_F(KafkaConnectorTest, a_retried_head_wedges_its_partition_until_recover_redelivers_it) {
  constexpr int kRecords = 40;
  constexpr int kPartitions = 2;
  constexpr int32_t kWedgedPartition = 1;
  constexpr int64_t kWedgedOffset = 5;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  Produced produced;
  produce_orders(topic, kPartitions, kRecords, "wedge", produced);

  std::atomic<int> attempts{0};
  auto b = binding("orders", topic, [&](const connector::MessageCtx& ctx, const Order&) {
    const auto& c = coords(ctx);
    if (c.partition != kWedgedPartition || c.offset != kWedgedOffset) {
      return std::optional<std::string>();
    }
    return ++attempts == 1 ? std::optional<std::string>("not yet") : std::nullopt;
  });
  b.poison_threshold(100);
  auto source = connect(config(group, topic));
  log::LogCapture capture;
  auto rt = runtime(b, source, quick_config());
  {
    Consumer consumer(*rt);
    EXPECT_TRUE(eventually([&] { return executions() == kRecords; }, 60s)) << executions();
    EXPECT_EQ(await_committed(group, topic, produced.end), produced.end)
        << "the commit of the wedged partition did not move again";
  }
  EXPECT_EQ(attempts.load(), 2) << "rejected once, then redelivered by the rebuilt consumer";
  EXPECT_TRUE(capture.contains({fmt::format("partition {}[{}] is stalled", topic, kWedgedPartition),
                                fmt::format("offset {} was retried", kWedgedOffset),
                                "rebuilding the source"}));
  EXPECT_EQ(capture.count_containing("rebuilding the source"), 1u);
  EXPECT_EQ(metrics_->counter(metrics::kConnectorRetried,
                              {{"source", "orders"}, {"reason", "mapping_rejected"}}),
            1);
  EXPECT_EQ(execution_refs(), produced.refs);
  EXPECT_EQ(claims(), kRecords);
  EXPECT_TRUE(sink_->letters().empty());
}

// KAF-4: a new group under `latest` whose very first record fails three
// times. Each failure is a stall and a rebuild; each rebuilt consumer must
// come back to that record (the floor is committed), not re-resolve `latest`
// past it to the log end.
TEST_F(KafkaConnectorTest,
       latest_group_whose_first_record_keeps_failing_is_not_skipped_by_rebuilds) {
  const auto topic = make_topic(1);
  const auto group = unique_name("g");
  Produced before;  // before the group exists: not its work
  produce_orders(topic, 1, 3, "before", before);

  constexpr int kFailures = 3;
  std::atomic<int> attempts{0};
  auto b = binding("orders", topic, [&](const connector::MessageCtx&, const Order& o) {
    if (o.order_id != "first") return std::optional<std::string>();
    return ++attempts <= kFailures ? std::optional<std::string>("not yet") : std::nullopt;
  });
  b.poison_threshold(10);
  // The EOF event resolves `latest` before any record exists.
  auto source = connect(config(group, topic, "latest").property("enable.partition.eof", "true"));
  log::LogCapture capture;
  auto rt = runtime(b, source, quick_config());
  Produced expected;
  {
    Consumer consumer(*rt);
    ASSERT_TRUE(eventually([&] { return source->snapshot().floors_committed.contains(0); }, 60s));
    EXPECT_EQ(committed(group, topic), before.end) << "the floor is the log end at resolution";
    produce_order(topic, 0, "first", expected);
    produce_order(topic, 0, "second", expected);
    produce_order(topic, 0, "third", expected);
    EXPECT_TRUE(eventually([&] { return executions() == 3; }, 60s)) << executions();
    EXPECT_EQ(await_committed(group, topic, expected.end), expected.end);
  }
  EXPECT_EQ(attempts.load(), kFailures + 1);
  EXPECT_EQ(capture.count_containing("rebuilding the source"), static_cast<size_t>(kFailures));
  EXPECT_EQ(execution_refs(), expected.refs)
      << "the first record was skipped, or records from before the group were started";
  EXPECT_TRUE(sink_->letters().empty());
}

// KAF-5 / CON-14 through the runtime: the harvest.connector.lag gauge is the
// group's backlog over all partitions — produced minus committed — and two
// replicas, each owning part of the topic, report the same number.
TEST_F(KafkaConnectorTest,
       lag_gauge_is_produced_minus_committed_over_all_partitions_on_each_replica) {
  constexpr int kPartitions = 3;
  const auto topic = make_topic(kPartitions);
  const auto group = unique_name("g");
  std::atomic<bool> hold_late{true};
  auto b = binding("orders", topic, [&](const connector::MessageCtx&, const Order& o) {
    if (hold_late && o.order_id.starts_with("late")) {
      return std::optional<std::string>("held back by the test");
    }
    return std::optional<std::string>();
  });
  b.poison_threshold(0);
  auto a_source = connect(config(group, topic));
  auto b_source = connect(config(group, topic));

  // Both replicas consume (one pass each in turn, on this thread) until the
  // group has split the partitions and committed every early record.
  Produced early;
  produce_orders(topic, kPartitions, 9, "early", early);
  {
    auto a = runtime(b, a_source, quick_config());
    auto b_runtime = runtime(b, b_source, quick_config());
    ASSERT_TRUE(eventually(
        [&] {
          for (auto* rt : {a.get(), b_runtime.get()}) {
            auto pass = rt->run_once();
            EXPECT_TRUE(pass || pass.error().kind == ConnectorErrorKind::kSource)
                << pass.error().message;
          }
          return executions() == 9 && !a_source->snapshot().owned.empty() &&
                 !b_source->snapshot().owned.empty() && committed(group, topic) == early.end;
        },
        60s));
  }

  // A backlog the replicas cannot work off: the late records are rejected.
  Produced late;
  for (auto [partition, count] : std::map<int32_t, int>{{0, 2}, {1, 3}, {2, 1}}) {
    for (int i = 0; i < count; ++i) {
      produce_order(topic, partition, fmt::format("late-{}-{}", partition, i), late);
    }
  }
  const auto commits = committed(group, topic);
  ASSERT_EQ(commits, early.end);
  int64_t backlog = 0;
  for (const auto& [partition, end] : late.end) backlog += end - commits.at(partition);
  ASSERT_EQ(backlog, 6);

  // Fresh runtimes over the same sources sample on their first pass; each
  // replica has its own recorder, as two processes would.
  auto sampling = quick_config();
  sampling.lag_sample_interval = 1s;
  auto a_metrics = std::make_shared<metrics::RecordingMetrics>();
  auto b_metrics = std::make_shared<metrics::RecordingMetrics>();
  auto shared_binding = std::make_shared<const connector::SourceBinding>(b);
  ConnectorRuntime a(shared_binding, a_source, *engine_, a_metrics,
                     connector::IdempotencyMode::kAuto, sampling);
  ConnectorRuntime b_runtime(shared_binding, b_source, *engine_, b_metrics,
                             connector::IdempotencyMode::kAuto, sampling);
  a.with_dead_letter_sink(sink_);
  b_runtime.with_dead_letter_sink(sink_);
  (void)a.run_once();  // samples, then stalls on its held records
  (void)b_runtime.run_once();
  const metrics::Labels gauge{{"source", "orders"}};
  EXPECT_EQ(a_metrics->gauge(metrics::kConnectorLag, gauge), std::optional<double>(backlog));
  EXPECT_EQ(b_metrics->gauge(metrics::kConnectorLag, gauge), std::optional<double>(backlog));
  EXPECT_EQ(committed(group, topic), early.end) << "nothing may be committed between the samples";

  // Released: both replicas recover, work the backlog off, and agree on 0.
  hold_late = false;
  {
    Consumer a_consumer(a);
    Consumer b_consumer(b_runtime);
    EXPECT_TRUE(eventually([&] { return executions() == 15; }, 60s)) << executions();
    EXPECT_EQ(await_committed(group, topic, late.end), late.end);
    EXPECT_TRUE(eventually(
        [&] {
          return a_metrics->gauge(metrics::kConnectorLag, gauge) == std::optional<double>(0) &&
                 b_metrics->gauge(metrics::kConnectorLag, gauge) == std::optional<double>(0);
        },
        30s))
        << "lag after the backlog was committed: "
        << a_metrics->gauge(metrics::kConnectorLag, gauge).value_or(-1) << " / "
        << b_metrics->gauge(metrics::kConnectorLag, gauge).value_or(-1);
  }
}

// CON-4 for Kafka. KafkaSource::connect is lazy, so none of these touch a
// broker; build() needs the database.
class KafkaBuildTest : public KafkaConnectorTest {
 protected:
  std::string refusal_of(plugin::HarvestPlugin p) {
    try {
      (void)p.build();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(KafkaBuildTest, two_bindings_on_one_canonical_subscription_are_refused_naming_both) {
  auto first = connect(KafkaSourceConfig("B:9092,a", "orders-group", "orders.placed"));
  auto second = connect(KafkaSourceConfig("a:9092, b", "orders-group", "orders.placed"));
  ASSERT_EQ(first->subscription_identity(), second->subscription_identity());
  const auto refusal = refusal_of(plugin()
                                      .connector(binding("orders-a", "orders.placed"), first)
                                      .connector(binding("orders-b", "orders.placed"), second));
  EXPECT_NE(refusal.find("bindings 'orders-a' and 'orders-b' consume the same subscription (" +
                         first->subscription_identity() + ")"),
            std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("a:9092,b:9092"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("own consumer group"), std::string::npos) << refusal;

  // The effective group.id counts: a .property override lands on the same group.
  auto overridden = connect(KafkaSourceConfig("b,A", "some-other-group", "orders.placed")
                                .property("group.id", "orders-group"));
  const auto by_override =
      refusal_of(plugin()
                     .connector(binding("orders-a", "orders.placed"), first)
                     .connector(binding("orders-c", "orders.placed"), overridden));
  EXPECT_NE(by_override.find("bindings 'orders-a' and 'orders-c' consume the same subscription"),
            std::string::npos)
      << by_override;
}

TEST_F(KafkaBuildTest, distinct_group_ids_on_one_topic_are_accepted) {
  auto first = connect(KafkaSourceConfig("B:9092,a", "orders-group-1", "orders.placed"));
  auto second = connect(KafkaSourceConfig("a:9092, b", "orders-group-2", "orders.placed"));
  auto app = plugin()
                 .connector(binding("orders-a", "orders.placed"), first)
                 .connector(binding("orders-b", "orders.placed"), second)
                 .build();
  ASSERT_TRUE(app);
  EXPECT_EQ(app->runtime("orders-a").binding().name(), "orders-a");
  EXPECT_EQ(app->runtime("orders-b").binding().name(), "orders-b");
  // Two groups on one topic fan one stream into one workflow twice: allowed,
  // and said out loud.
  ASSERT_EQ(app->warnings().size(), 1u);
  EXPECT_NE(app->warnings()[0].find("bindings 'orders-a' and 'orders-b' feed stream "
                                    "'orders.placed' into workflow 'fulfil_order' from different "
                                    "subscriptions (fan-in)"),
            std::string::npos)
      << app->warnings()[0];
}

TEST_F(KafkaBuildTest, broker_native_dead_letter_on_kafka_is_refused) {
  auto source = connect(KafkaSourceConfig("a:9092", "orders-group", "orders.placed"));
  EXPECT_EQ(source->dead_letter_destination(), std::nullopt);
  auto b = binding("orders", "orders.placed");
  b.broker_native_dead_letter();
  const auto refusal = refusal_of(plugin().connector(b, source));
  EXPECT_NE(refusal.find("binding 'orders' uses broker_native_dead_letter() but its source "
                         "reports no dead-letter destination"),
            std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("Kafka has none"), std::string::npos) << refusal;
}

}  // namespace
}  // namespace harvest::kafka::testing
