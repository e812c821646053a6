// The demo's helper for the Kafka quickstart:
//   kafka_orders_tool topic               create `orders.placed` (8 partitions)
//   kafka_orders_tool produce <n>         produce n orders, with a progress bar
//   kafka_orders_tool lag                 work the `harvest-orders` group still owes
// The broker is $KAFKA_BOOTSTRAP.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

#include "kafka/kafka_source.hpp"
#include "kafka/testing/test_broker.hpp"

using namespace harvest;

namespace {
constexpr const char* kTopic = "orders.placed";
constexpr int kPartitions = 8;
}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  const char* env = std::getenv("KAFKA_BOOTSTRAP");
  std::string brokers = env ? env : "localhost:9092";
  if (cmd == "lag") {
    auto source =
        kafka::KafkaSource::connect(kafka::KafkaSourceConfig(brokers, "harvest-orders", kTopic));
    if (!source) return std::cerr << source.error().message << "\n", 1;
    auto lag = (*source)->lag(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    if (!lag || !*lag) return std::cerr << "lag unavailable\n", 1;
    fmt::print("{}\n", **lag);
    return 0;
  }
  auto broker = kafka::testing::TestBroker::connect(brokers);
  if (!broker) return std::cerr << broker.error().message << "\n", 1;
  if (cmd == "topic") {
    auto s = (*broker)->create_topic(kTopic, kPartitions);
    if (!s && s.error().kind == ErrorKind::kConflict) {
      fmt::print("topic {} exists\n", kTopic);
      return 0;
    }
    if (!s) return std::cerr << s.error().message << "\n", 1;
    fmt::print("topic {} ready ({} partitions)\n", kTopic, kPartitions);
    return 0;
  }
  if (cmd == "produce") {
    int n = argc > 2 ? std::atoi(argv[2]) : 1000;
    for (int i = 1; i <= n; ++i) {
      std::string id = fmt::format("A-{:05d}", i);
      kafka::testing::Record r{
          .partition = i % kPartitions,
          .key = id,
          .payload = fmt::format(R"({{"order_id":"{}","total_cents":{}}})", id, 1000 + i)};
      if (auto s = (*broker)->produce(kTopic, r); !s) {
        return std::cerr << "\n" << s.error().message << "\n", 1;
      }
      if (i % 10 == 0 || i == n) {
        int width = 40, done = i * width / n;
        fmt::print(stderr, "\r  producing [{}{}] {}/{}", std::string(done, '#'),
                   std::string(width - done, '.'), i, n);
      }
    }
    fmt::print(stderr, "\n");
    return 0;
  }
  std::cerr << "usage: kafka_orders_tool topic | produce <n> | lag\n";
  return 2;
}
