// Fixture for KafkaSource tests against the real broker started by
// scripts/test.sh ($HARVEST_TEST_KAFKA_BOOTSTRAP). Every test gets its own
// topic and group names, so tests are independent and may run in parallel
// processes (except the broker-freezing one, which runs serially).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>

namespace harvest::kafka::testing {

using namespace std::chrono_literals;
using connector::KafkaCoordinates;
using connector::Message;

inline const KafkaCoordinates& coords(const Message& m) {
  return std::get<KafkaCoordinates>(m.coordinates);
}

class KafkaSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bootstrap = bootstrap_from_env();
    ASSERT_TRUE(bootstrap) << bootstrap.error().message;
    auto broker = TestBroker::connect(*bootstrap);
    ASSERT_TRUE(broker) << broker.error().message;
    broker_ = std::move(*broker);
  }

  // A fresh topic with `partitions` partitions.
  std::string make_topic(int partitions) {
    std::string topic = unique_name("harvest-test");
    auto created = broker_->create_topic(topic, partitions);
    EXPECT_TRUE(created) << created.error().message;
    return topic;
  }

  // Produces `record` and returns its offset (-1 after a failed expectation).
  int64_t produce(const std::string& topic, Record record) {
    auto offset = broker_->produce(topic, record);
    EXPECT_TRUE(offset) << offset.error().message;
    return offset ? *offset : -1;
  }
  int64_t produce(const std::string& topic, int32_t partition, std::string payload) {
    return produce(topic, Record{.partition = partition, .payload = std::move(payload)});
  }

  // The test defaults: a heartbeat short enough that rebalances take well
  // under a second to notice.
  static KafkaSourceConfig config(const std::string& group, const std::string& topic,
                                  const std::string& reset = "earliest") {
    return KafkaSourceConfig(broker_bootstrap(), group, topic)
        .property("auto.offset.reset", reset)
        .property("heartbeat.interval.ms", "250")
        .property("session.timeout.ms", "6000");
  }

  static std::string broker_bootstrap() {
    auto b = bootstrap_from_env();
    return b ? *b : std::string();
  }

  static std::shared_ptr<KafkaSource> connect(const KafkaSourceConfig& cfg) {
    auto source = KafkaSource::connect(cfg);
    EXPECT_TRUE(source) << source.error().message;
    return source ? *source : nullptr;
  }

  // Receives until `n` messages arrived or `within` passed.
  static std::vector<Message> receive_n(KafkaSource& source, size_t n,
                                        std::chrono::milliseconds within = 30s) {
    std::vector<Message> out;
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      auto batch = source.receive(n - out.size(), 500ms);
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch) break;
      for (auto& m : *batch) out.push_back(std::move(m));
    }
    return out;
  }

  // Receives (discarding everything else) until a message at
  // partition/offset arrives; nullopt if it does not within `within`.
  static std::optional<Message> receive_at(KafkaSource& source, int32_t partition, int64_t offset,
                                           std::chrono::milliseconds within = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      auto batch = source.receive(100, 500ms);
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch) return std::nullopt;
      for (auto& m : *batch) {
        if (coords(m).partition == partition && coords(m).offset == offset) return std::move(m);
      }
    }
    return std::nullopt;
  }

  // The group's committed offsets as the broker reports them now.
  std::map<int32_t, int64_t> committed(const std::string& group, const std::string& topic) {
    auto c = broker_->committed(group, topic);
    EXPECT_TRUE(c) << c.error().message;
    return c ? *c : std::map<int32_t, int64_t>{};
  }

  // Polls the broker until the group's commits equal `expected`; returns the
  // last answer (so a failed EXPECT_EQ shows what the broker holds).
  std::map<int32_t, int64_t> await_committed(const std::string& group, const std::string& topic,
                                             const std::map<int32_t, int64_t>& expected,
                                             std::chrono::milliseconds within = 20s) {
    return broker_->await_committed(group, topic, expected, within);
  }

  // Re-evaluates `pred` until it holds or `within` passes. The short pause
  // between attempts is a polling interval for state that lives in another
  // process (the broker) or thread; nothing relies on its length.
  static bool eventually(const std::function<bool()>& pred,
                         std::chrono::milliseconds within = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return pred();
  }

  std::unique_ptr<TestBroker> broker_;
};

}  // namespace harvest::kafka::testing
