// SQS-2, SQS-4: SqsSource passes the shared EventSource contract against the
// real SQS-compatible server, each test on a queue of its own.
#include "event_source_contract.hpp"
#include "test_queues.hpp"
#include <harvest/sqs/sqs_source.hpp>

namespace harvest::connector::contract {
namespace {

struct SqsQueueHarness {
  static constexpr const char* kName = "sqs";
  sqs::testing::TestQueues queues;
  std::string queue = queues.create("contract");

  std::shared_ptr<EventSource> open() {
    // A visibility timeout well past every wait in the suite: a message the
    // contract leaves unacked must not reappear by itself mid-test.
    return std::make_shared<sqs::SqsSource>(
        queues.client(), sqs::SqsSourceConfig(queue).visibility_timeout_secs(60));
  }
  void produce(const std::vector<std::string>& payloads) { (void)queues.send(queue, payloads); }
  void close(std::shared_ptr<EventSource>& s) { s.reset(); }
};

using Harnesses = ::testing::Types<SqsQueueHarness>;
INSTANTIATE_TYPED_TEST_SUITE_P(Sqs, EventSourceContract, Harnesses);

}  // namespace
}  // namespace harvest::connector::contract
