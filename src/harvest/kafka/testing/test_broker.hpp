// Test tooling for a real Kafka broker (the one scripts/services/kafka.sh
// starts): create topics, produce records to exact partitions with their
// offsets from the delivery report, read a group's committed offsets.
//
// For tests, benchmarks and demos only; production code never links it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <harvest/common/error.hpp>

namespace RdKafka {
class KafkaConsumer;
class Producer;
}  // namespace RdKafka

namespace harvest::kafka::testing {

// $HARVEST_TEST_KAFKA_BOOTSTRAP, or a config error saying how to start the
// broker (scripts/test.sh does it for the `kafka` label).
[[nodiscard]] Result<std::string> bootstrap_from_env();

// `prefix` made unique across processes and calls (pid, counter, random).
[[nodiscard]] std::string unique_name(const std::string& prefix);

struct Record {
  int32_t partition = 0;
  std::optional<std::string> key;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A producer handle on the broker, also used for the Admin API.
// Not thread-safe: one test thread uses it.
class TestBroker {
 public:
  [[nodiscard]] static Result<std::unique_ptr<TestBroker>> connect(std::string bootstrap);
  ~TestBroker();
  TestBroker(const TestBroker&) = delete;
  TestBroker& operator=(const TestBroker&) = delete;

  [[nodiscard]] const std::string& bootstrap() const { return bootstrap_; }

  // Creates `topic` (replication factor 1) through the Admin API and waits
  // until its metadata shows every partition with a leader. kConflict when
  // the topic already exists.
  [[nodiscard]] Status create_topic(const std::string& topic, int partitions,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Deletes `topic` through the Admin API and waits until this handle's
  // metadata no longer shows it (a topic recreated after this starts over
  // at offset 0).
  [[nodiscard]] Status delete_topic(const std::string& topic,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Produces one record to `record.partition` and waits for its delivery
  // report; returns the offset the broker assigned.
  [[nodiscard]] Result<int64_t> produce(
      const std::string& topic, const Record& record,
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // The committed offset of `group` for every partition of `topic` that has
  // one (partitions without a commit are omitted). Uses a short-lived
  // consumer with that group.id that never joins the group.
  [[nodiscard]] Result<std::map<int32_t, int64_t>> committed(
      const std::string& group, const std::string& topic,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Another member rewinding the group: joins `group` (range assignment),
  // waits for its share of `topic`, commits `offset` on each partition it got
  // and leaves. Returns those partitions.
  [[nodiscard]] Result<std::vector<int32_t>> rewind_as_member(
      const std::string& group, const std::string& topic, int64_t offset,
      std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Polls `committed` until it equals `expected` or `within` passes; returns
  // the last answer (empty while the broker errs), so a caller's failed
  // comparison shows what the broker holds.
  [[nodiscard]] std::map<int32_t, int64_t> await_committed(
      const std::string& group, const std::string& topic,
      const std::map<int32_t, int64_t>& expected,
      std::chrono::milliseconds within = std::chrono::seconds(30));

 private:
  class DeliveryReports;
  // A consumer with `group`'s id that never joins the group.
  [[nodiscard]] Result<std::unique_ptr<RdKafka::KafkaConsumer>> outside_consumer(
      const std::string& group) const;
  TestBroker(std::string bootstrap, std::unique_ptr<DeliveryReports> reports,
             std::unique_ptr<RdKafka::Producer> producer);

  std::string bootstrap_;
  std::unique_ptr<DeliveryReports> reports_;
  std::unique_ptr<RdKafka::Producer> producer_;
};

}  // namespace harvest::kafka::testing
