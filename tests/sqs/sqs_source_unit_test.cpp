// SQS-1: SqsSourceConfig validation and the shape of SqsSource's
// ReceiveMessage calls (the long-poll wait, batching into calls of 10),
// observed on a local fake endpoint.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "fake_http_server.hpp"
#include "scoped_env.hpp"
#include <harvest/common/log.hpp>
#include <harvest/sqs/sqs_source.hpp>

namespace harvest::sqs {
namespace {

using namespace std::chrono_literals;
using testing::FakeHttpServer;
using testing::IsolatedAwsEnv;

const std::string kQueue = "http://127.0.0.1:1/000000000000/device-telemetry";

std::shared_ptr<SqsClient> offline_client(const std::string& endpoint = "http://127.0.0.1:1") {
  auto client =
      SqsClient::create({.endpoint = endpoint,
                         .region = "us-east-1",
                         .credentials = std::make_shared<StaticCredentialsProvider>("x", "x")});
  EXPECT_TRUE(client) << client.error().message;
  return *client;
}

TEST(SqsSourceConfig, stream_defaults_to_the_queue_name) {
  EXPECT_EQ(SqsSourceConfig(kQueue).stream_name(), "device-telemetry");
  EXPECT_EQ(SqsSourceConfig(kQueue + "/").stream_name(), "device-telemetry");
  EXPECT_EQ(SqsSourceConfig(kQueue).stream("telemetry").stream_name(), "telemetry");
  SqsSource source(offline_client(), SqsSourceConfig(kQueue));
  EXPECT_EQ(source.stream(), "device-telemetry");
  EXPECT_EQ(source.subscription_identity(), kQueue);
}

TEST(SqsSourceConfig, invalid_fields_are_named) {
  auto message = [](const SqsSourceConfig& c) {
    auto ok = c.validate();
    EXPECT_FALSE(ok);
    return ok ? std::string() : ok.error().message;
  };
  EXPECT_NE(message(SqsSourceConfig("device-telemetry")).find("queue_url"), std::string::npos);
  EXPECT_NE(message(SqsSourceConfig(kQueue).max_per_receive(11)).find("max_per_receive"),
            std::string::npos);
  EXPECT_NE(message(SqsSourceConfig(kQueue).max_per_receive(0)).find("max_per_receive"),
            std::string::npos);
  EXPECT_NE(
      message(SqsSourceConfig(kQueue).visibility_timeout_secs(-1)).find("visibility_timeout_secs"),
      std::string::npos);
  EXPECT_NE(message(SqsSourceConfig(kQueue).stream("")).find("stream"), std::string::npos);
  EXPECT_TRUE(
      SqsSourceConfig(kQueue).visibility_timeout_secs(43200).max_per_receive(10).validate());
}

TEST(SqsSourceConfig, constructor_throws_config_error_and_connect_returns_it) {
  EXPECT_THROW(SqsSource(nullptr, SqsSourceConfig(kQueue)), ConfigError);
  EXPECT_THROW(SqsSource(offline_client(), SqsSourceConfig(kQueue).max_per_receive(20)),
               ConfigError);
  auto r = SqsSource::connect(SqsSourceConfig(kQueue).max_per_receive(20));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kConfig);
}

// A fake SQS that records every ReceiveMessage request and answers each with
// the next count from `answers` (fresh messages each time).
class ReceiveRecorder {
 public:
  explicit ReceiveRecorder(std::vector<int> answers)
      : answers_(std::move(answers)), fake_([this](httplib::Server& s) {
          s.Post("/", [this](const httplib::Request& req, httplib::Response& res) {
            std::lock_guard lock(mu_);
            requests_.push_back(nlohmann::json::parse(req.body));
            int n = calls_ < answers_.size() ? answers_[calls_] : 0;
            ++calls_;
            nlohmann::json messages = nlohmann::json::array();
            for (int i = 0; i < n; ++i) {
              std::string id = "m" + std::to_string(next_id_++);
              messages.push_back({{"MessageId", id},
                                  {"ReceiptHandle", id + "#rh"},
                                  {"Body", "body-" + id},
                                  {"Attributes", {{"ApproximateReceiveCount", "3"}}}});
            }
            res.set_content(nlohmann::json{{"Messages", messages}}.dump(), "application/json");
          });
        }) {}

  std::vector<nlohmann::json> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::string url() const { return fake_.url(); }

 private:
  std::mutex mu_;
  std::vector<int> answers_;
  size_t calls_ = 0;
  int next_id_ = 0;
  std::vector<nlohmann::json> requests_;
  FakeHttpServer fake_;
};

TEST(SqsSourceReceive, larger_batches_take_several_calls_and_only_the_first_waits) {
  IsolatedAwsEnv env;
  ReceiveRecorder sqs({10, 10, 5});
  // Receive-ahead off: its background call after a full answer would race
  // the request count below (it has its own test against the real server).
  SqsSource source(offline_client(sqs.url()),
                   SqsSourceConfig(kQueue).visibility_timeout_secs(60).receive_ahead(false));
  auto batch = source.receive(25, 1500ms);
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_EQ(batch->size(), 25u);
  auto requests = sqs.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0]["WaitTimeSeconds"], 2);  // ceil(1.5 s)
  EXPECT_EQ(requests[1]["WaitTimeSeconds"], 0);
  EXPECT_EQ(requests[2]["WaitTimeSeconds"], 0);
  EXPECT_EQ(requests[0]["MaxNumberOfMessages"], 10);
  EXPECT_EQ(requests[2]["MaxNumberOfMessages"], 5);
  for (const auto& r : requests) {
    EXPECT_EQ(r["QueueUrl"], kQueue);
    EXPECT_EQ(r["VisibilityTimeout"], 60);
    EXPECT_EQ(r["MessageAttributeNames"], nlohmann::json::array({"All"}));
    EXPECT_EQ(r["MessageSystemAttributeNames"], nlohmann::json::array({"All"}));
  }
  EXPECT_EQ((*batch)[0].receive_count, 3);
}

TEST(SqsSourceReceive, a_short_answer_ends_the_receive) {
  IsolatedAwsEnv env;
  ReceiveRecorder sqs({4, 10});
  SqsSource source(offline_client(sqs.url()), SqsSourceConfig(kQueue));
  auto batch = source.receive(30, 100ms);
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_EQ(batch->size(), 4u);
  auto requests = sqs.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["WaitTimeSeconds"], 1);  // sub-second still long-polls
  EXPECT_FALSE(requests[0].contains("VisibilityTimeout"));
}

TEST(SqsSourceReceive, wait_is_capped_at_20_seconds_and_max_per_receive_is_honoured) {
  IsolatedAwsEnv env;
  ReceiveRecorder sqs({3, 3, 1});
  SqsSource source(offline_client(sqs.url()),
                   SqsSourceConfig(kQueue).max_per_receive(3).receive_ahead(false));
  auto batch = source.receive(7, 60s);
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_EQ(batch->size(), 7u);
  auto requests = sqs.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0]["WaitTimeSeconds"], 20);
  EXPECT_EQ(requests[0]["MaxNumberOfMessages"], 3);
  EXPECT_EQ(requests[2]["MaxNumberOfMessages"], 1);
}

TEST(SqsSourceReceive, zero_max_asks_nothing) {
  IsolatedAwsEnv env;
  ReceiveRecorder sqs({10});
  SqsSource source(offline_client(sqs.url()), SqsSourceConfig(kQueue));
  auto batch = source.receive(0, 1s);
  ASSERT_TRUE(batch);
  EXPECT_TRUE(batch->empty());
  EXPECT_TRUE(sqs.requests().empty());
}

TEST(SqsSourceReceive, a_failed_follow_up_call_still_hands_over_what_was_received) {
  IsolatedAwsEnv env;
  int calls = 0;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request&, httplib::Response& res) {
      if (++calls > 1) {
        res.status = 500;
        res.set_content("There was an internal server error.", "text/plain");
        return;
      }
      nlohmann::json messages = nlohmann::json::array();
      for (int i = 0; i < 10; ++i)
        messages.push_back({{"MessageId", "m" + std::to_string(i)},
                            {"ReceiptHandle", "rh" + std::to_string(i)},
                            {"Body", "b"}});
      res.set_content(nlohmann::json{{"Messages", messages}}.dump(), "application/json");
    });
  });
  log::LogCapture capture;
  SqsSource source(offline_client(fake.url()), SqsSourceConfig(kQueue));
  auto batch = source.receive(20, 1s);
  // The first 10 are already invisible on the broker: returning an error
  // would strand them until their visibility timeout.
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_EQ(batch->size(), 10u);
  EXPECT_TRUE(capture.contains({kQueue, "after 10 messages", "HTTP 500"}));
}

TEST(SqsSourceReceive, unreachable_server_is_a_transient_receive_error) {
  IsolatedAwsEnv env;
  std::string closed;
  {
    FakeHttpServer gone([](httplib::Server&) {});
    closed = gone.url();
  }
  SqsSource source(offline_client(closed), SqsSourceConfig(kQueue));
  auto batch = source.receive(10, 1s);
  ASSERT_FALSE(batch);
  EXPECT_EQ(batch.error().kind, ErrorKind::kTransient);
}

// --- ack / abandon batching ----------------------------------------------------

std::vector<connector::Message> messages_of(int n) {
  std::vector<connector::Message> out;
  for (int i = 0; i < n; ++i)
    out.push_back(
        {.coordinates = connector::SqsCoordinates{.queue_url = kQueue,
                                                  .message_id = "msg-" + std::to_string(i),
                                                  .receipt_handle = "rh-" + std::to_string(i)}});
  return out;
}

// A fake SQS recording batch calls; fails the entries whose receipt handle is
// listed in `failing` (SenderFault as given).
class BatchRecorder {
 public:
  BatchRecorder(std::set<std::string> failing, bool sender_fault)
      : failing_(std::move(failing)),
        sender_fault_(sender_fault),
        fake_([this](httplib::Server& s) {
          s.Post("/", [this](const httplib::Request& req, httplib::Response& res) {
            auto body = nlohmann::json::parse(req.body);
            std::lock_guard lock(mu_);
            calls_.push_back({req.get_header_value("X-Amz-Target"), body});
            nlohmann::json ok = nlohmann::json::array(), failed = nlohmann::json::array();
            for (const auto& e : body["Entries"]) {
              if (failing_.contains(e["ReceiptHandle"].get<std::string>()))
                failed.push_back({{"Id", e["Id"]},
                                  {"Code", "InternalError"},
                                  {"Message", "try again"},
                                  {"SenderFault", sender_fault_}});
              else
                ok.push_back({{"Id", e["Id"]}});
            }
            res.set_content(nlohmann::json{{"Successful", ok}, {"Failed", failed}}.dump(),
                            "application/json");
          });
        }) {}

  std::vector<std::pair<std::string, nlohmann::json>> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::string url() const { return fake_.url(); }

 private:
  std::mutex mu_;
  std::set<std::string> failing_;
  bool sender_fault_;
  std::vector<std::pair<std::string, nlohmann::json>> calls_;
  FakeHttpServer fake_;
};

TEST(SqsSourceAck, deletes_in_chunks_of_ten_and_names_failed_message_ids) {
  IsolatedAwsEnv env;
  BatchRecorder sqs({"rh-13"}, /*sender_fault=*/false);
  SqsSource source(offline_client(sqs.url()), SqsSourceConfig(kQueue));
  auto r = source.ack(messages_of(25));
  ASSERT_FALSE(r);
  // A service-side entry failure may pass on retry.
  EXPECT_EQ(r.error().kind, ErrorKind::kTransient);
  EXPECT_NE(
      r.error().message.find("failed for 1 of 25 messages: msg-13 (InternalError: try again)"),
      std::string::npos)
      << r.error().message;
  auto calls = sqs.calls();
  ASSERT_EQ(calls.size(), 3u);  // every chunk was tried despite the failure
  EXPECT_EQ(calls[0].first, "AmazonSQS.DeleteMessageBatch");
  EXPECT_EQ(calls[0].second["Entries"].size(), 10u);
  EXPECT_EQ(calls[1].second["Entries"].size(), 10u);
  EXPECT_EQ(calls[2].second["Entries"].size(), 5u);
  EXPECT_EQ(calls[2].second["Entries"][4]["ReceiptHandle"], "rh-24");
}

TEST(SqsSourceAck, a_failed_call_keeps_its_kind_and_names_the_unsettled_messages) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([](httplib::Server& s) {
    s.Post("/", [](const httplib::Request&, httplib::Response& res) {
      res.status = 400;
      res.set_content(R"({"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"gone"})",
                      "application/json");
    });
  });
  SqsSource source(offline_client(fake.url()), SqsSourceConfig(kQueue));
  auto r = source.ack(messages_of(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(r.error().message.find("failed for 2 of 2 messages: msg-0, msg-1"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("QueueDoesNotExist"), std::string::npos);
}

TEST(SqsSourceAck, abandon_sets_visibility_zero_in_chunks) {
  IsolatedAwsEnv env;
  BatchRecorder sqs({}, true);
  SqsSource source(offline_client(sqs.url()), SqsSourceConfig(kQueue));
  ASSERT_TRUE(source.abandon(messages_of(12)));
  auto calls = sqs.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].first, "AmazonSQS.ChangeMessageVisibilityBatch");
  EXPECT_EQ(calls[1].second["Entries"].size(), 2u);
  for (const auto& [target, body] : calls)
    for (const auto& e : body["Entries"]) EXPECT_EQ(e["VisibilityTimeout"], 0);
  EXPECT_TRUE(source.ack({}));
  EXPECT_EQ(sqs.calls().size(), 2u);  // nothing to ack: no call
}

TEST(SqsSourceLag, a_slow_answer_is_cut_at_the_deadline_and_reported_as_none) {
  IsolatedAwsEnv env;
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request&, httplib::Response& res) {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return released; });
      res.set_content("{}", "application/json");
    });
  });
  SqsSource source(offline_client(fake.url()), SqsSourceConfig(kQueue));
  const auto start = std::chrono::steady_clock::now();
  auto lag = source.lag(start + 300ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard lock(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_TRUE(lag) << lag.error().message;
  EXPECT_EQ(*lag, std::nullopt);
  EXPECT_LT(elapsed, 2s);
}

}  // namespace
}  // namespace harvest::sqs
