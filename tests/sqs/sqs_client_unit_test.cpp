// SQS client without a server: error answers mapped to ErrorKind (the retry
// policy) from canned bodies, and the wire behaviour of SqsClient against a
// local fake endpoint — signed JSON 1.0 requests, connection reuse, timeouts
// and transport failures.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "fake_http_server.hpp"
#include "scoped_env.hpp"
#include <harvest/sqs/sqs_client.hpp>
#include <harvest/sqs/sqs_error.hpp>

namespace harvest::sqs {
namespace {

using testing::FakeHttpServer;
using testing::IsolatedAwsEnv;

// --- error mapping --------------------------------------------------------------

TEST(SqsErrors, elasticmq_queue_does_not_exist_with_capital_message_is_not_found) {
  Error e = sqs_error("ReceiveMessage", "http://q/000000000000/gone", 400,
                      R"({"Message":"The specified queue does not exist.",)"
                      R"("__type":"com.amazonaws.sqs#QueueDoesNotExist"})");
  EXPECT_EQ(e.kind, ErrorKind::kNotFound);
  EXPECT_EQ(e.message,
            "SQS ReceiveMessage on http://q/000000000000/gone: QueueDoesNotExist: The specified "
            "queue does not exist. (HTTP 400)");
}

TEST(SqsErrors, aws_throttling_with_lowercase_message_is_transient) {
  Error e = sqs_error("SendMessage", "", 400,
                      R"({"__type":"com.amazonaws.sqs#ThrottlingException",)"
                      R"("message":"Rate exceeded"})");
  EXPECT_EQ(e.kind, ErrorKind::kTransient);
  EXPECT_EQ(e.message, "SQS SendMessage: ThrottlingException: Rate exceeded (HTTP 400)");
  for (const char* code : {"RequestThrottled", "Throttling", "KmsThrottled", "OverLimit",
                           "ServiceUnavailable", "InternalError", "ExpiredToken"}) {
    EXPECT_EQ(sqs_error("X", "", 400, fmt::format(R"({{"__type":"{}"}})", code)).kind,
              ErrorKind::kTransient)
        << code;
  }
}

TEST(SqsErrors, other_client_errors_are_permanent_bad_requests) {
  for (const char* code : {"InvalidAttributeValue", "ReceiptHandleIsInvalid", "AccessDenied",
                           "InvalidAction", "QueueNameExists", "SignatureDoesNotMatch"}) {
    Error e = sqs_error("X", "", code == std::string("AccessDenied") ? 403 : 400,
                        fmt::format(R"({{"__type":"com.amazonaws.sqs#{}","message":"m"}})", code));
    EXPECT_EQ(e.kind, ErrorKind::kBadRequest) << code;
    EXPECT_TRUE(is_permanent(e)) << code;
    EXPECT_NE(e.message.find(code), std::string::npos);
  }
}

TEST(SqsErrors, non_json_500_is_transient_and_keeps_the_text) {
  Error e = sqs_error("SendMessage", "http://q", 500, "There was an internal server error.");
  EXPECT_EQ(e.kind, ErrorKind::kTransient);
  EXPECT_NE(e.message.find("There was an internal server error."), std::string::npos);
  EXPECT_NE(e.message.find("HTTP 500"), std::string::npos);
}

TEST(SqsErrors, non_json_or_empty_4xx_bodies_and_status_only_rules) {
  EXPECT_EQ(sqs_error("X", "", 400, "<html>bad gateway config</html>").kind,
            ErrorKind::kBadRequest);
  EXPECT_EQ(sqs_error("X", "", 429, "").kind, ErrorKind::kTransient);
  EXPECT_EQ(sqs_error("X", "", 503, "").kind, ErrorKind::kTransient);
  EXPECT_NE(sqs_error("X", "", 403, "").message.find("no error detail"), std::string::npos);
}

TEST(SqsErrors, code_forms_bare_uri_suffixed_and_query_header) {
  EXPECT_EQ(parse_sqs_error(R"({"__type":"QueueDoesNotExist"})").code, "QueueDoesNotExist");
  EXPECT_EQ(
      parse_sqs_error(R"({"__type":"aws.sqs#QueueDoesNotExist:http://internal.amazon.com/"})").code,
      "QueueDoesNotExist");
  EXPECT_EQ(sqs_error("X", "", 400, "{}", "AWS.SimpleQueueService.NonExistentQueue;Sender").kind,
            ErrorKind::kNotFound);
}

// --- the client on the wire ----------------------------------------------------

std::shared_ptr<SqsClient> client_for(const FakeHttpServer& fake, SqsClientConfig config = {}) {
  config.endpoint = fake.url();
  config.region = "eu-west-1";
  if (!config.credentials)
    config.credentials = std::make_shared<StaticCredentialsProvider>("AKIDTEST", "secret", "tok");
  auto client = SqsClient::create(std::move(config));
  EXPECT_TRUE(client) << client.error().message;
  return *client;
}

TEST(SqsClientWire, requests_are_signed_json_1_0_posts_to_the_root) {
  IsolatedAwsEnv env;
  httplib::Headers seen;
  std::string seen_body, seen_path;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      seen = req.headers;
      seen_body = req.body;
      seen_path = req.path;
      res.set_content(R"({"Attributes":{"ApproximateNumberOfMessages":"3"}})", "application/json");
    });
  });
  auto attrs =
      client_for(fake)->get_queue_attributes("http://q/0/work", {"ApproximateNumberOfMessages"});
  ASSERT_TRUE(attrs) << attrs.error().message;
  fake.sync();
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessages"), "3");

  auto h = [&](const char* name) {
    auto it = seen.find(name);
    return it == seen.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(seen_path, "/");
  EXPECT_EQ(h("Content-Type"), "application/x-amz-json-1.0");
  EXPECT_EQ(h("X-Amz-Target"), "AmazonSQS.GetQueueAttributes");
  EXPECT_EQ(h("X-Amz-Security-Token"), "tok");
  EXPECT_EQ(h("Expect"), "<absent>");
  const std::string auth = h("Authorization");
  EXPECT_EQ(auth.rfind("AWS4-HMAC-SHA256 Credential=AKIDTEST/", 0), 0u) << auth;
  EXPECT_NE(auth.find("/eu-west-1/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date;"
                      "x-amz-security-token;x-amz-target, Signature="),
            std::string::npos)
      << auth;
  EXPECT_EQ(
      nlohmann::json::parse(seen_body),
      nlohmann::json::parse(
          R"({"QueueUrl":"http://q/0/work","AttributeNames":["ApproximateNumberOfMessages"]})"));
}

TEST(SqsClientWire, error_answers_are_mapped_and_non_json_500_is_transient) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("X-Amz-Target") == "AmazonSQS.GetQueueUrl") {
        res.status = 400;
        res.set_header("X-Amzn-Query-Error", "com.amazonaws.sqs#QueueDoesNotExist");
        res.set_content(R"({"Message":"The specified queue does not exist.",)"
                        R"("__type":"com.amazonaws.sqs#QueueDoesNotExist"})",
                        "application/json");
      } else {
        res.status = 500;
        res.set_content("There was an internal server error.", "text/plain");
      }
    });
  });
  auto client = client_for(fake);
  auto url = client->get_queue_url("missing");
  ASSERT_FALSE(url);
  EXPECT_EQ(url.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(url.error().message.find("GetQueueUrl on missing"), std::string::npos)
      << url.error().message;
  auto sent = client->send_message("http://q/0/work", {.body = "x"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().kind, ErrorKind::kTransient);
}

TEST(SqsClientWire, delete_batch_failed_entries_on_http_200_are_reported) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"Failed":[{"Code":"ReceiptHandleIsInvalid","Id":"1",)"
                      R"("Message":"stale","SenderFault":true}],"Successful":[{"Id":"0"}]})",
                      "application/json");
    });
  });
  auto r = client_for(fake)->delete_message_batch(
      "http://q/0/work", {{.id = "0", .receipt_handle = "a"}, {.id = "1", .receipt_handle = "b"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->successful, std::vector<std::string>{"0"});
  ASSERT_EQ(r->failed.size(), 1u);
  EXPECT_EQ(r->failed[0].id, "1");
  EXPECT_EQ(r->failed[0].code, "ReceiptHandleIsInvalid");
  EXPECT_TRUE(r->failed[0].sender_fault);
}

TEST(SqsClientWire, batches_over_ten_entries_are_refused_before_sending) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([](httplib::Server&) {});
  std::vector<ReceiptEntry> eleven(11, ReceiptEntry{.id = "x", .receipt_handle = "h"});
  auto r = client_for(fake)->delete_message_batch("http://q/0/work", eleven);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
}

TEST(SqsClientWire, sequential_calls_reuse_one_connection) {
  IsolatedAwsEnv env;
  std::mutex mu;
  std::set<int> client_ports;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.set_keep_alive_max_count(100);
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      client_ports.insert(req.remote_port);
      res.set_content(R"({"QueueUrls":[]})", "application/json");
    });
  });
  auto client = client_for(fake);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(client->call("ListQueues", SqsJson::object()));
  std::lock_guard lock(mu);
  EXPECT_EQ(client_ports.size(), 1u);
}

TEST(SqsClientWire, one_client_serves_concurrent_callers) {
  IsolatedAwsEnv env;
  std::atomic<int> served{0};
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      ++served;
      // Echo the queue so each caller can check it got its own answer.
      auto body = nlohmann::json::parse(req.body);
      res.set_content(nlohmann::json{{"QueueUrl", body["QueueName"]}}.dump(), "application/json");
    });
  });
  auto client = client_for(fake);
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) {
          std::string name = "q" + std::to_string(t) + "-" + std::to_string(i);
          auto url = client->get_queue_url(name);
          if (!url || *url != name) ++wrong;
        }
      });
    }
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(served.load(), 40);
}

TEST(SqsClientWire, a_call_past_its_timeout_fails_transient) {
  IsolatedAwsEnv env;
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request&, httplib::Response& res) {
      // Hold the answer until the test has seen its client give up.
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return released; });
      res.set_content("{}", "application/json");
    });
  });
  auto client = client_for(fake, {.request_timeout = std::chrono::milliseconds(300)});
  const auto start = std::chrono::steady_clock::now();
  auto r = client->purge_queue("http://q/0/work");
  const auto elapsed = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard lock(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTransient);
  EXPECT_NE(r.error().message.find("PurgeQueue on http://q/0/work"), std::string::npos)
      << r.error().message;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(SqsClientWire, connection_refused_is_transient) {
  IsolatedAwsEnv env;
  std::string closed;
  {
    FakeHttpServer gone([](httplib::Server&) {});
    closed = gone.url();
  }
  auto client =
      SqsClient::create({.endpoint = closed,
                         .region = "us-east-1",
                         .credentials = std::make_shared<StaticCredentialsProvider>("x", "x")});
  ASSERT_TRUE(client);
  auto r = (*client)->call("ListQueues", SqsJson::object());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTransient);
}

TEST(SqsClientWire, missing_credentials_fail_the_call_with_a_config_error) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([](httplib::Server&) {});
  auto client = SqsClient::create({.endpoint = fake.url(), .region = "us-east-1"});
  ASSERT_TRUE(client);
  auto r = (*client)->call("ListQueues", SqsJson::object());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kConfig);
  EXPECT_NE(r.error().message.find("SQS ListQueues: no AWS credentials found"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace harvest::sqs
