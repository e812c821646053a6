// The demo's helper for the Kafka quickstart:
//   kafka_orders_tool topic               create `orders.placed` (8 partitions)
//   kafka_orders_tool produce <n>         produce n orders, with a progress bar
//   kafka_orders_tool lag                 work the `harvest-orders` group still owes
//   kafka_orders_tool send                stream `key<TAB>value` lines from stdin (chaos suite)
// The broker is $KAFKA_BOOTSTRAP.
#include <fmt/format.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>

using namespace harvest;

namespace {
constexpr const char* kTopic = "orders.placed";
constexpr int kPartitions = 8;

// Keeps every record whose delivery failed, to send again.
class KeepFailures : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& m) override {
    if (m.err() == RdKafka::ERR_NO_ERROR) return;
    if (failed.empty()) std::cerr << "delivery failed: " << m.errstr() << "\n";
    failed.emplace_back(m.key() ? *m.key() : std::string(),
                        std::string(static_cast<const char*>(m.payload()), m.len()));
  }
  std::vector<std::pair<std::string, std::string>> failed;  // key, value
};

std::unique_ptr<RdKafka::Producer> make_producer(const std::string& brokers, KeepFailures& report) {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  for (auto [k, v] : {std::pair{"bootstrap.servers", brokers.c_str()},
                      {"enable.idempotence", "true"},
                      {"message.timeout.ms", "300000"},
                      {"linger.ms", "5"}}) {
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) return std::cerr << err << "\n", nullptr;
  }
  if (conf->set("dr_cb", &report, err) != RdKafka::Conf::CONF_OK) {
    return std::cerr << err << "\n", nullptr;
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), err));
  if (!producer) std::cerr << err << "\n";
  return producer;
}

// `send`: an idempotent producer that rides out a broker outage. Records wait
// in librdkafka's queue (up to 5 minutes each) while the broker is down and
// are delivered once, in order, when it is back. An idempotent producer can
// also fail fatally (a broker just started may answer a first batch with
// OUT_OF_ORDER_SEQUENCE_NUMBER while it loads its producer state): then the
// records it failed are sent again by a new producer — at most a repeat of a
// record, which the connector's dedupe key absorbs. Exits non-zero if a record
// could not be delivered after 5 producers.
int send_lines(const std::string& brokers) {
  KeepFailures report;
  auto producer = make_producer(brokers, report);
  if (!producer) return 1;
  int producers = 1;
  // Sends one record; on a fatal producer error, replaces the producer.
  std::function<bool(const std::string&, const std::string&)> send;
  send = [&](const std::string& key, const std::string& value) -> bool {
    for (;;) {
      auto e = producer->produce(kTopic, RdKafka::Topic::PARTITION_UA,
                                 RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
                                 value.size(), key.data(), key.size(), 0, nullptr);
      if (e == RdKafka::ERR_NO_ERROR) return true;
      if (e == RdKafka::ERR__QUEUE_FULL) {
        producer->poll(100);
        continue;
      }
      if (e != RdKafka::ERR__FATAL || producers >= 5) {
        std::cerr << RdKafka::err2str(e) << "\n";
        return false;
      }
      std::string reason;
      producer->fatal_error(reason);
      std::cerr << "producer failed fatally (" << reason << "); a new one sends its failures\n";
      producer->flush(10000);  // its queued records fail now, into report.failed
      producer = make_producer(brokers, report);
      if (!producer) return false;
      ++producers;
      auto again = std::move(report.failed);
      report.failed.clear();
      for (const auto& [k, v] : again) {
        if (!send(k, v)) return false;
      }
    }
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    const size_t tab = line.find('\t');
    const std::string key = tab == std::string::npos ? "" : line.substr(0, tab);
    const std::string value = tab == std::string::npos ? line : line.substr(tab + 1);
    if (!send(key, value)) return 1;
    producer->poll(0);
  }
  for (;;) {
    if (producer->flush(600000) != RdKafka::ERR_NO_ERROR) {
      return std::cerr << "records still undelivered after 10 minutes\n", 1;
    }
    std::string reason;
    if (report.failed.empty()) return 0;
    if (producer->fatal_error(reason) == RdKafka::ERR_NO_ERROR || producers >= 5) return 1;
    std::cerr << "producer failed fatally (" << reason << "); a new one sends its failures\n";
    producer = make_producer(brokers, report);
    if (!producer) return 1;
    ++producers;
    auto again = std::move(report.failed);
    report.failed.clear();
    for (const auto& [k, v] : again) {
      if (!send(k, v)) return 1;
    }
  }
}
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
  if (cmd == "send") return send_lines(brokers);
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
  std::cerr << "usage: kafka_orders_tool topic | produce <n> | lag | send\n";
  return 2;
}
