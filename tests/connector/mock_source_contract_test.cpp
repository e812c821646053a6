// CON-15: MockSource passes the EventSource contract in both of its shapes.
#include "event_source_contract.hpp"
#include <harvest/connector/mock_source.hpp>

namespace harvest::connector::contract {
namespace {

struct PositionalMock {
  static constexpr const char* kName = "positional";
  std::shared_ptr<MockSource> source = std::make_shared<MockSource>("orders.placed");
  int64_t next = 0;
  std::shared_ptr<EventSource> open() { return source; }
  void produce(const std::vector<std::string>& payloads) {
    for (const auto& p : payloads) source->push_kafka(0, next++, p);
  }
  void close(std::shared_ptr<EventSource>& s) { s.reset(); }
};

struct RedeliveringMock {
  static constexpr const char* kName = "redelivering";
  std::shared_ptr<MockSource> source =
      std::make_shared<MockSource>("telemetry", MockSource::Kind::kRedelivering);
  std::shared_ptr<EventSource> open() { return source; }
  void produce(const std::vector<std::string>& payloads) {
    for (const auto& p : payloads) source->push_sqs(p);
  }
  void close(std::shared_ptr<EventSource>& s) { s.reset(); }
};

using Harnesses = ::testing::Types<PositionalMock, RedeliveringMock>;
INSTANTIATE_TYPED_TEST_SUITE_P(MockSource, EventSourceContract, Harnesses);

}  // namespace
}  // namespace harvest::connector::contract
