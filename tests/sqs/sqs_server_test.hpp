// Test support for the `sqs` label: a fixture over the real SQS-compatible
// server (ElasticMQ) that scripts/test.sh starts with scripts/services/sqs.sh
// and exports as HARVEST_TEST_SQS_ENDPOINT. Each test creates its own
// uniquely named queues (through TestQueues) and they are deleted afterwards.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_queues.hpp"
#include <harvest/sqs/sqs_client.hpp>

namespace harvest::sqs::testing {

class SqsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      queues_.emplace();
    } catch (const std::exception& e) {
      GTEST_FAIL() << e.what();
    }
    client_ = queues_->client();
  }

  // A fresh queue named "<prefix>-<random>" (FIFO queues need the ".fifo"
  // suffix in `prefix` ending). Deleted at tear-down.
  std::string create_queue(const std::string& prefix,
                           const std::map<std::string, std::string>& attributes = {}) {
    try {
      return queues_->create(prefix, attributes);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      return {};
    }
  }

  static std::string unique_name(const std::string& prefix) {
    return TestQueues::unique_name(prefix);
  }

  // Sends `n` messages with bodies "<body_prefix>0".."<body_prefix>(n-1)"
  // in batches of 10; returns their MessageIds in order.
  std::vector<std::string> send_many(const std::string& queue_url, int n,
                                     const std::string& body_prefix = "m") {
    std::vector<std::string> ids;
    for (int start = 0; start < n; start += 10) {
      std::vector<OutgoingMessage> batch;
      for (int i = start; i < std::min(n, start + 10); ++i)
        batch.push_back({.id = "e" + std::to_string(i), .body = body_prefix + std::to_string(i)});
      auto r = client_->send_message_batch(queue_url, batch);
      EXPECT_TRUE(r) << r.error().message;
      if (!r) return ids;
      EXPECT_TRUE(r->failed.empty());
      for (const auto& m : batch) ids.push_back(r->message_ids[m.id]);
    }
    return ids;
  }

  // Polls `fetch` until it returns a value satisfying `done` or `timeout`
  // passes; returns the last value fetched.
  template <typename T>
  T poll_until(std::function<T()> fetch, std::function<bool(const T&)> done,
               std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    T value = fetch();
    while (!done(value) && std::chrono::steady_clock::now() < deadline) value = fetch();
    return value;
  }

  const std::string& endpoint() const { return queues_->endpoint(); }
  const std::shared_ptr<SqsClient>& client() const { return client_; }
  const std::shared_ptr<CredentialsProvider>& credentials() const { return queues_->credentials(); }

 private:
  // Owns the client and deletes the queues it created when the test ends.
  std::optional<TestQueues> queues_;

 protected:
  std::shared_ptr<SqsClient> client_;
};

}  // namespace harvest::sqs::testing
