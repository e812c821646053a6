// Test support for the `sqs` label outside a gtest fixture: `TestQueues`
// owns a client on the SQS-compatible server scripts/services/sqs.sh starts
// (HARVEST_TEST_SQS_ENDPOINT), creates uniquely named queues — plain, or with
// a redrive policy to a fresh dead-letter queue — and deletes them when it is
// destroyed. The EventSource contract harness and the connector tests hold
// one each; `SqsServerTest` (sqs_server_test.hpp) is the fixture form for
// the client and source tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <harvest/sqs/sqs_client.hpp>

namespace harvest::sqs::testing {

// Queue depth as SQS reports it: ElasticMQ's counts are exact.
struct QueueDepth {
  long visible = -1;      // ApproximateNumberOfMessages
  long not_visible = -1;  // ApproximateNumberOfMessagesNotVisible (in flight)
  [[nodiscard]] long total() const { return visible + not_visible; }
  bool operator==(const QueueDepth&) const = default;
};

inline void PrintTo(const QueueDepth& d, std::ostream* os) {
  *os << "{visible " << d.visible << ", in flight " << d.not_visible << "}";
}

// A queue with a redrive policy and its dead-letter queue.
struct RedrivenQueue {
  std::string url;
  std::string dlq_url;
  std::string dlq_arn;
};

// Not thread-safe; one per test. Throws std::runtime_error (which fails the
// test with the message) when the server's endpoint is not configured.
class TestQueues {
 public:
  TestQueues() {
    const char* endpoint = std::getenv("HARVEST_TEST_SQS_ENDPOINT");
    if (!endpoint || !*endpoint)
      throw std::runtime_error(
          "HARVEST_TEST_SQS_ENDPOINT is not set. Run the sqs tests through scripts/test.sh, or "
          "start the server with `eval \"$(scripts/services/sqs.sh start)\"` and export "
          "HARVEST_TEST_SQS_ENDPOINT=$SQS_ENDPOINT.");
    endpoint_ = endpoint;
    credentials_ = std::make_shared<StaticCredentialsProvider>("x", "x");
    auto client = SqsClient::create(
        {.endpoint = endpoint_, .region = "us-east-1", .credentials = credentials_});
    if (!client) throw std::runtime_error("SqsClient::create: " + client.error().message);
    client_ = *client;
  }
  ~TestQueues() {
    // Best effort: a queue a test deleted itself answers QueueDoesNotExist.
    for (const auto& url : created_) (void)client_->delete_queue(url);
  }
  TestQueues(const TestQueues&) = delete;
  TestQueues& operator=(const TestQueues&) = delete;

  // A fresh queue named "<prefix>-<random>"; deleted on destruction.
  std::string create(const std::string& prefix,
                     const std::map<std::string, std::string>& attributes = {}) {
    auto url = client_->create_queue(unique_name(prefix), attributes);
    if (!url) throw std::runtime_error("CreateQueue " + prefix + ": " + url.error().message);
    created_.push_back(*url);
    return *url;
  }

  // A queue whose RedrivePolicy moves a message to a fresh DLQ on the receive
  // after `max_receive_count` receives.
  RedrivenQueue create_redriven(const std::string& prefix, int max_receive_count) {
    RedrivenQueue q;
    q.dlq_url = create(prefix + "-dlq");
    auto attrs = client_->get_queue_attributes(q.dlq_url, {"QueueArn"});
    if (!attrs) throw std::runtime_error("GetQueueAttributes QueueArn: " + attrs.error().message);
    q.dlq_arn = attrs->at("QueueArn");
    nlohmann::json policy{{"deadLetterTargetArn", q.dlq_arn},
                          {"maxReceiveCount", std::to_string(max_receive_count)}};
    q.url = create(prefix, {{"RedrivePolicy", policy.dump()}});
    return q;
  }

  // A queue URL on this server that names no queue.
  std::string missing_queue_url() const {
    return endpoint_ + "/000000000000/" + unique_name("missing");
  }

  // Sends `bodies` in batches of 10; returns their MessageIds in order.
  std::vector<std::string> send(const std::string& queue_url,
                                const std::vector<std::string>& bodies) {
    std::vector<OutgoingMessage> messages;
    for (const auto& body : bodies) messages.push_back({.body = body});
    return send(queue_url, std::move(messages));
  }
  std::vector<std::string> send(const std::string& queue_url,
                                std::vector<OutgoingMessage> messages) {
    std::vector<std::string> ids;
    for (size_t start = 0; start < messages.size(); start += 10) {
      std::vector<OutgoingMessage> batch;
      for (size_t i = start; i < std::min(messages.size(), start + 10); ++i) {
        batch.push_back(messages[i]);
        batch.back().id = "e" + std::to_string(i);
      }
      auto r = client_->send_message_batch(queue_url, batch);
      if (!r) throw std::runtime_error("SendMessageBatch: " + r.error().message);
      if (!r->failed.empty())
        throw std::runtime_error("SendMessageBatch failed entry " + r->failed[0].id + ": " +
                                 r->failed[0].message);
      for (const auto& m : batch) ids.push_back(r->message_ids.at(m.id));
    }
    return ids;
  }

  QueueDepth depth(const std::string& queue_url) const {
    auto a = client_->get_queue_attributes(
        queue_url, {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"});
    EXPECT_TRUE(a) << a.error().message;
    if (!a) return {};
    return {std::stol(a->at("ApproximateNumberOfMessages")),
            std::stol(a->at("ApproximateNumberOfMessagesNotVisible"))};
  }

  // "<prefix>-<random>"; a FIFO prefix ("….fifo") keeps its suffix last.
  static std::string unique_name(const std::string& prefix) {
    static std::mt19937_64 rng{std::random_device{}()};
    std::string suffix = std::to_string(rng() % 1'000'000'000'000ULL);
    if (prefix.ends_with(".fifo"))
      return prefix.substr(0, prefix.size() - 5) + "-" + suffix + ".fifo";
    return prefix + "-" + suffix;
  }

  const std::string& endpoint() const { return endpoint_; }
  const std::shared_ptr<SqsClient>& client() const { return client_; }
  const std::shared_ptr<CredentialsProvider>& credentials() const { return credentials_; }

 private:
  std::string endpoint_;
  std::shared_ptr<CredentialsProvider> credentials_;
  std::shared_ptr<SqsClient> client_;
  std::vector<std::string> created_;
};

}  // namespace harvest::sqs::testing
