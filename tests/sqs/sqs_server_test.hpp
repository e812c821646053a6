// Test support for the `sqs` label: a fixture over the real SQS-compatible
// server (ElasticMQ) that scripts/test.sh starts with scripts/services/sqs.sh
// and exports as HARVEST_TEST_SQS_ENDPOINT. Each test creates its own
// uniquely named queues and the fixture deletes them afterwards.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sqs/sqs_client.hpp"

namespace harvest::sqs::testing {

class SqsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* endpoint = std::getenv("HARVEST_TEST_SQS_ENDPOINT");
    if (!endpoint || !*endpoint)
      GTEST_FAIL() << "HARVEST_TEST_SQS_ENDPOINT is not set. Run the sqs tests through "
                      "scripts/test.sh, or start the server with "
                      "`eval \"$(scripts/services/sqs.sh start)\"` and export "
                      "HARVEST_TEST_SQS_ENDPOINT=$SQS_ENDPOINT.";
    endpoint_ = endpoint;
    credentials_ = std::make_shared<StaticCredentialsProvider>("x", "x");
    auto client = SqsClient::create(
        {.endpoint = endpoint_, .region = "us-east-1", .credentials = credentials_});
    ASSERT_TRUE(client) << client.error().message;
    client_ = *client;
  }

  void TearDown() override {
    if (!client_) return;
    for (const auto& url : created_) {
      // Best effort: a queue a test already deleted answers QueueDoesNotExist.
      (void)client_->delete_queue(url);
    }
  }

  // A fresh queue named "<prefix>-<random>" (FIFO queues need the ".fifo"
  // suffix in `prefix` ending). Deleted at tear-down.
  std::string create_queue(const std::string& prefix,
                           const std::map<std::string, std::string>& attributes = {}) {
    std::string name = unique_name(prefix);
    auto url = client_->create_queue(name, attributes);
    EXPECT_TRUE(url) << url.error().message;
    if (!url) return {};
    created_.push_back(*url);
    return *url;
  }

  static std::string unique_name(const std::string& prefix) {
    static std::mt19937_64 rng{std::random_device{}()};
    std::string suffix = std::to_string(rng() % 1'000'000'000'000ULL);
    if (prefix.ends_with(".fifo"))
      return prefix.substr(0, prefix.size() - 5) + "-" + suffix + ".fifo";
    return prefix + "-" + suffix;
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
