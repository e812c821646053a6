// Fixture for the end-to-end Kafka tests: the connector runtime and
// the plugin over KafkaSource, against the real broker ($HARVEST_TEST_KAFKA_
// BOOTSTRAP) and a fresh PostgreSQL database per test ($HARVEST_TEST_DATABASE_
// URL). Every test gets its own topic, group and database, so tests are
// independent and may run in parallel processes (except the ones that freeze
// the broker, which run serially).
//
// Records are orders (`order_json`), each starting `fulfil_order`. Every
// mapping attempt names a different run (workflow id `order-<id>#<n>`), so
// workflow-id reuse can never stand in for the broker-coordinate dedupe key:
// a redelivery resolves to the existing execution only through that key, and
// "one execution per order" is a real check, not a schema constraint.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "connector_fixture.hpp"
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>
#include <harvest/plugin/plugin.hpp>

namespace harvest::kafka::testing {

using namespace std::chrono_literals;
using connector::testing::Order;
using connector::testing::order_json;

// What a test produced: the end offset per partition and, per order (one
// expected execution each), the coordinates ("topic:partition:offset") of its
// record.
struct Produced {
  std::map<int32_t, int64_t> end;
  std::map<std::string, std::string> refs;  // order_id -> start_source_ref

  void add(const std::string& topic, int32_t partition, int64_t offset,
           const std::string& order_id) {
    end[partition] = std::max(end[partition], offset + 1);
    refs[order_id] = topic + ":" + std::to_string(partition) + ":" + std::to_string(offset);
  }
};

// Decides, per mapping attempt, whether an order is rejected (a reason) or
// mapped (std::nullopt). Called from the runtime's dispatch threads.
using RejectFn =
    std::function<std::optional<std::string>(const connector::MessageCtx&, const Order&)>;

class KafkaConnectorTest : public connector::testing::ConnectorTest {
 protected:
  void SetUp() override {
    ConnectorTest::SetUp();
    if (HasFatalFailure()) return;
    auto bootstrap = bootstrap_from_env();
    ASSERT_TRUE(bootstrap) << bootstrap.error().message;
    auto broker = TestBroker::connect(*bootstrap);
    ASSERT_TRUE(broker) << broker.error().message;
    broker_ = std::move(*broker);
  }

  std::string make_topic(int partitions) {
    std::string topic = unique_name("harvest-e2e");
    auto created = broker_->create_topic(topic, partitions);
    EXPECT_TRUE(created) << created.error().message;
    return topic;
  }

  // Produces `count` orders `<prefix>-<i>`, round robin over `partitions`
  // partitions, into `into` (by exact coordinates from the delivery reports).
  void produce_orders(const std::string& topic, int partitions, int count,
                      const std::string& prefix, Produced& into) {
    for (int i = 0; i < count; ++i) {
      const std::string id = prefix + "-" + std::to_string(i);
      produce_order(topic, i % partitions, id, into);
    }
  }
  void produce_order(const std::string& topic, int32_t partition, const std::string& id,
                     Produced& into) {
    auto offset =
        broker_->produce(topic, Record{.partition = partition, .payload = order_json(id)});
    ASSERT_TRUE(offset) << offset.error().message;
    into.add(topic, partition, *offset, id);
  }

  std::map<int32_t, int64_t> committed(const std::string& group, const std::string& topic) {
    auto c = broker_->committed(group, topic);
    EXPECT_TRUE(c) << c.error().message;
    return c ? *c : std::map<int32_t, int64_t>{};
  }
  // Polls the broker until the group's commits equal `expected`; returns the
  // last answer so a failed EXPECT_EQ shows what the broker holds.
  std::map<int32_t, int64_t> await_committed(const std::string& group, const std::string& topic,
                                             const std::map<int32_t, int64_t>& expected,
                                             std::chrono::milliseconds within = 30s) {
    return broker_->await_committed(group, topic, expected, within);
  }

  // Test consumer defaults: a short heartbeat so rebalances are noticed well
  // under a second; 6 s is the broker's minimum session timeout.
  static KafkaSourceConfig config(const std::string& group, const std::string& topic,
                                  const std::string& reset = "earliest") {
    auto bootstrap = bootstrap_from_env();
    return KafkaSourceConfig(bootstrap ? *bootstrap : std::string(), group, topic)
        .property("auto.offset.reset", reset)
        .property("heartbeat.interval.ms", "250")
        .property("session.timeout.ms", "6000");
  }
  static std::shared_ptr<KafkaSource> connect(const KafkaSourceConfig& cfg) {
    auto source = KafkaSource::connect(cfg);
    EXPECT_TRUE(source) << source.error().message;
    return source ? *source : nullptr;
  }

  // starts(name, topic, "fulfil_order"): order `<id>` -> a run named
  // `order-<id>#<n>`, fresh for every mapping attempt (see the file comment),
  // unless `reject` rejects this attempt.
  static connector::SourceBinding binding(const std::string& name, const std::string& topic,
                                          RejectFn reject = {}) {
    static std::atomic<uint64_t> attempt{0};
    auto b = connector::SourceBinding::starts(name, topic, "fulfil_order");
    b.map_json([reject = std::move(reject)](const connector::MessageCtx& ctx,
                                            Order o) -> connector::MapResult {
      if (reject) {
        if (auto reason = reject(ctx, o)) return std::unexpected(*reason);
      }
      return connector::MappedMessage{"order-" + o.order_id + "#" + std::to_string(++attempt), o};
    });
    return b;
  }

  // Polling knobs for tests: react within a few tens of milliseconds.
  static connector::ConnectorRuntimeConfig quick_config() {
    connector::ConnectorRuntimeConfig c;
    c.poll_timeout = 200ms;
    c.idle_backoff = 20ms;
    return c;
  }

  // A plugin over this test's database with the connector test workflows.
  plugin::HarvestPlugin plugin() {
    plugin::HarvestPlugin p;
    engine::EngineConfig config;
    config = engine_config(config);
    config.profile = engine::Profile::kTest;
    p.engine_config(config)
        .workflows(connector::testing::connector_workflows())
        .start_idempotency_window(std::chrono::hours(24 * 7));
    return p;
  }

  // Every execution: its order id -> start_source_ref ("topic:partition:
  // offset"). An order started twice is recorded in `duplicates`.
  std::map<std::string, std::string> execution_refs(
      std::vector<std::string>* duplicates = nullptr) {
    std::map<std::string, std::string> out;
    auto rows = db().exec(
        "SELECT input->>'order_id' AS order_id, coalesce(start_source_ref, '') AS ref FROM "
        "harvest_workflow_executions ORDER BY created_at");
    EXPECT_TRUE(rows) << rows.error().message;
    if (!rows) return out;
    for (int i = 0; i < rows->rows(); ++i) {
      auto [it, fresh] = out.emplace(rows->get(i, "order_id"), rows->get(i, "ref"));
      if (!fresh && duplicates) duplicates->push_back(it->first);
    }
    return out;
  }
  long long claims() { return scalar("SELECT count(*) FROM harvest_start_idempotency"); }
  long long completed() {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'");
  }
  double dispatched(const std::string& binding, const std::string& outcome) {
    return metrics_->counter(metrics::kConnectorDispatched,
                             {{"source", binding}, {"outcome", outcome}});
  }

  std::unique_ptr<TestBroker> broker_;
};

// Runs `runtime.run(stop)` on its own thread until destroyed.
class Consumer {
 public:
  explicit Consumer(connector::ConnectorRuntime& runtime)
      : thread_([&runtime](std::stop_token stop) {
          auto status = runtime.run(stop);
          EXPECT_TRUE(status) << status.error().message;
        }) {}

 private:
  std::jthread thread_;
};

}  // namespace harvest::kafka::testing
