// KAF-6: KafkaSource passes the EventSource contract (the suite MockSource
// passes) against the real broker.
#include <stdexcept>

#include "event_source_contract.hpp"
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>

namespace harvest::connector::contract {
namespace {

using namespace harvest::kafka;

// A fresh single-partition topic and group per test. Throws (reported by
// GoogleTest as a failure of the test) when the broker is not configured.
struct KafkaHarness {
  static constexpr const char* kName = "kafka";

  KafkaHarness() {
    auto bootstrap = testing::bootstrap_from_env();
    if (!bootstrap) throw std::runtime_error(bootstrap.error().message);
    auto broker = testing::TestBroker::connect(*bootstrap);
    if (!broker) throw std::runtime_error(broker.error().message);
    broker_ = std::move(*broker);
    topic_ = testing::unique_name("harvest-contract");
    group_ = testing::unique_name("g");
    if (auto created = broker_->create_topic(topic_, 1); !created) {
      throw std::runtime_error(created.error().message);
    }
  }

  std::shared_ptr<EventSource> open() {
    auto source = KafkaSource::connect(KafkaSourceConfig(broker_->bootstrap(), group_, topic_)
                                           .property("auto.offset.reset", "earliest")
                                           .property("heartbeat.interval.ms", "250")
                                           .property("session.timeout.ms", "6000"));
    if (!source) throw std::runtime_error(source.error().message);
    return *source;
  }

  void produce(const std::vector<std::string>& payloads) {
    for (const auto& p : payloads) {
      auto offset = broker_->produce(topic_, testing::Record{.partition = 0, .payload = p});
      if (!offset) throw std::runtime_error(offset.error().message);
    }
  }

  // Destroying the source leaves the group, committing its acked prefix.
  void close(std::shared_ptr<EventSource>& s) { s.reset(); }

 private:
  std::unique_ptr<testing::TestBroker> broker_;
  std::string topic_;
  std::string group_;
};

using Harnesses = ::testing::Types<KafkaHarness>;
INSTANTIATE_TYPED_TEST_SUITE_P(KafkaSource, EventSourceContract, Harnesses);

}  // namespace
}  // namespace harvest::connector::contract
