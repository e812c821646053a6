// SQS-1, SQS-2, SQS-4, CON-8 (coordinates), CON-10 (redrive): SqsSource
// against the real SQS-compatible server (ElasticMQ).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "scoped_env.hpp"
#include "sqs_server_test.hpp"
#include <harvest/common/log.hpp>
#include <harvest/sqs/sqs_source.hpp>

namespace harvest::sqs {
namespace {

using connector::Message;
using connector::SqsCoordinates;
using namespace std::chrono_literals;

class SqsSourceTest : public testing::SqsServerTest {
 protected:
  // A source over `queue` on the fixture's client, its config adjusted by `configure`.
  std::shared_ptr<SqsSource> source_for(const std::string& queue,
                                        SqsSourceConfig configure(SqsSourceConfig)) {
    return std::make_shared<SqsSource>(client(), configure(SqsSourceConfig(queue)));
  }
  std::shared_ptr<SqsSource> source_for(const std::string& queue) {
    return std::make_shared<SqsSource>(client(), SqsSourceConfig(queue));
  }
  // A queue with a redrive policy to a fresh DLQ; returns {queue, dlq, dlq arn}.
  struct Redriven {
    std::string queue, dlq, dlq_arn;
  };
  Redriven create_redriven_queue(const std::string& prefix, int max_receive_count) {
    Redriven r;
    r.dlq = create_queue(prefix + "-dlq");
    auto attrs = client()->get_queue_attributes(r.dlq, {"QueueArn"});
    EXPECT_TRUE(attrs) << attrs.error().message;
    if (!attrs) return r;
    r.dlq_arn = attrs->at("QueueArn");
    nlohmann::json policy{{"deadLetterTargetArn", r.dlq_arn},
                          {"maxReceiveCount", std::to_string(max_receive_count)}};
    r.queue = create_queue(prefix, {{"RedrivePolicy", policy.dump()}});
    return r;
  }
  SqsSourceConfig connect_config(const std::string& queue) {
    return SqsSourceConfig(queue)
        .endpoint(endpoint())
        .region("us-east-1")
        .credentials(credentials());
  }
  static std::string id_of(const Message& m) {
    return std::get<SqsCoordinates>(m.coordinates).message_id;
  }
  // Receives until `n` messages arrived or `timeout` passed.
  std::vector<Message> receive_at_least(SqsSource& source, size_t n,
                                        std::chrono::seconds timeout = 15s) {
    std::vector<Message> all;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
      auto batch = source.receive(n - all.size(), 2s);
      EXPECT_TRUE(batch) << batch.error().message;
      if (!batch) break;
      for (auto& m : *batch) all.push_back(std::move(m));
    }
    return all;
  }
};

TEST_F(SqsSourceTest, receives_25_with_max_25_over_several_calls_then_acks_them_all) {
  auto queue = create_queue("many");
  auto sent = send_many(queue, 25);
  ASSERT_EQ(sent.size(), 25u);
  auto source = source_for(queue);

  auto batch = source->receive(25, 5s);
  ASSERT_TRUE(batch) << batch.error().message;
  // SQS hands out at most 10 per ReceiveMessage: 25 in one receive proves the
  // source made several calls.
  ASSERT_EQ(batch->size(), 25u);
  std::set<std::string> ids;
  for (const auto& m : *batch) ids.insert(id_of(m));
  EXPECT_EQ(ids, std::set<std::string>(sent.begin(), sent.end()));

  ASSERT_TRUE(source->ack(*batch));
  auto lag = source->lag(std::chrono::steady_clock::now() + 5s);
  ASSERT_TRUE(lag) << lag.error().message;
  EXPECT_EQ(*lag, 0);
}

TEST_F(SqsSourceTest, an_idle_receive_long_polls_once_for_the_poll_timeout) {
  auto queue = create_queue("idle");
  auto source = source_for(queue);
  const auto start = std::chrono::steady_clock::now();
  auto batch = source->receive(25, 1000ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(batch) << batch.error().message;
  EXPECT_TRUE(batch->empty());
  // WaitTimeSeconds 1 on the first call only: about one second, not three.
  EXPECT_GE(elapsed, 900ms);
  EXPECT_LT(elapsed, 2500ms);
}

TEST_F(SqsSourceTest, message_carries_coordinates_payload_headers_and_receive_count) {
  auto queue = create_queue("fields");
  const std::string body = R"({"device":"d-1","reading":21.5,"note":"caf\u00e9 ✓"})";
  auto id = client()->send_message(
      queue, {.body = body,
              .message_attributes = {
                  {.name = "tenant", .data_type = "String", .string_value = "acme"},
                  {.name = "priority", .data_type = "Number", .string_value = "7"},
                  {.name = "blob", .data_type = "Binary", .binary_value = "AAEC"},
                  {.name = "region", .data_type = "String.custom", .string_value = "eu"}}});
  ASSERT_TRUE(id) << id.error().message;
  auto source = source_for(queue);

  auto batch = receive_at_least(*source, 1);
  ASSERT_EQ(batch.size(), 1u);
  const Message& m = batch[0];
  const auto& c = std::get<SqsCoordinates>(m.coordinates);
  EXPECT_EQ(c.queue_url, queue);
  EXPECT_EQ(c.message_id, *id);
  EXPECT_FALSE(c.receipt_handle.empty());
  EXPECT_EQ(m.payload, body);
  EXPECT_EQ(m.key, std::nullopt);
  EXPECT_EQ(m.receive_count, 1);
  std::map<std::string, std::string> headers(m.headers.begin(), m.headers.end());
  EXPECT_EQ(headers.size(), 3u);  // the Binary attribute is not a text header
  EXPECT_EQ(headers["tenant"], "acme");
  EXPECT_EQ(headers["priority"], "7");
  EXPECT_EQ(headers["region"], "eu");

  EXPECT_EQ(source->stream(), queue.substr(queue.rfind('/') + 1));
  EXPECT_EQ(source->subscription_identity(), queue);
  EXPECT_TRUE(source->abandon_redelivers());
  auto recovered = source->recover();
  ASSERT_TRUE(recovered);
  EXPECT_FALSE(*recovered);
  EXPECT_EQ(source->dead_letter_destination(), std::nullopt);
}

TEST_F(SqsSourceTest, fifo_coordinates_use_the_message_id_never_the_deduplication_id) {
  auto queue = create_queue("ordered.fifo", {{"FifoQueue", "true"}});
  auto id = client()->send_message(
      queue,
      {.body = "x", .message_group_id = "g1", .message_deduplication_id = "business-key-42"});
  ASSERT_TRUE(id) << id.error().message;
  auto source = source_for(queue, [](SqsSourceConfig c) { return c.stream("orders"); });
  auto batch = receive_at_least(*source, 1);
  ASSERT_EQ(batch.size(), 1u);
  const auto& c = std::get<SqsCoordinates>(batch[0].coordinates);
  EXPECT_EQ(c.message_id, *id);
  EXPECT_NE(c.message_id, "business-key-42");
  EXPECT_EQ(c.receipt_handle.find("business-key-42"), std::string::npos);
  EXPECT_EQ(source->stream(), "orders");
}

TEST_F(SqsSourceTest, abandon_redelivers_at_once_with_receive_count_2) {
  auto queue = create_queue("abandon");
  auto sent = send_many(queue, 1);
  // A long visibility timeout, so only the abandon can bring it back soon.
  auto source = source_for(queue, [](SqsSourceConfig c) { return c.visibility_timeout_secs(120); });
  auto first = receive_at_least(*source, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].receive_count, 1);

  ASSERT_TRUE(source->abandon(first));
  auto again = source->receive(1, 5s);
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(id_of((*again)[0]), sent[0]);
  EXPECT_EQ((*again)[0].receive_count, 2);
}

TEST_F(SqsSourceTest, visibility_timeout_secs_is_sent_with_receive) {
  auto queue = create_queue("vt", {{"VisibilityTimeout", "300"}});
  auto sent = send_many(queue, 1);
  // The queue would hide a received message for 5 minutes; the source asks
  // for 1 s, so the unacked message is redelivered within the wait below.
  auto source = source_for(queue, [](SqsSourceConfig c) { return c.visibility_timeout_secs(1); });
  auto first = receive_at_least(*source, 1);
  ASSERT_EQ(first.size(), 1u);
  auto again = receive_at_least(*source, 1, 10s);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(id_of(again[0]), sent[0]);
  EXPECT_EQ(again[0].receive_count, 2);
}

TEST_F(SqsSourceTest, lag_is_visible_plus_in_flight) {
  auto queue = create_queue("lag");
  send_many(queue, 5);
  auto source = source_for(queue, [](SqsSourceConfig c) { return c.visibility_timeout_secs(120); });
  auto lag_now = [&] {
    auto l = source->lag(std::chrono::steady_clock::now() + 5s);
    EXPECT_TRUE(l) << l.error().message;
    return l ? l->value_or(-1) : -1;
  };
  EXPECT_EQ(lag_now(), 5);

  auto two = receive_at_least(*source, 2);
  ASSERT_EQ(two.size(), 2u);
  // Received but not deleted: still owed.
  EXPECT_EQ(lag_now(), 5);
  auto counts = client()->get_queue_attributes(
      queue, {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"});
  ASSERT_TRUE(counts);
  EXPECT_EQ(counts->at("ApproximateNumberOfMessages"), "3");
  EXPECT_EQ(counts->at("ApproximateNumberOfMessagesNotVisible"), "2");

  ASSERT_TRUE(source->ack(two));
  EXPECT_EQ(lag_now(), 3);
}

TEST_F(SqsSourceTest, lag_past_its_deadline_is_no_answer) {
  auto queue = create_queue("lagdeadline");
  auto source = source_for(queue);
  auto lag = source->lag(std::chrono::steady_clock::now() - 1ms);
  ASSERT_TRUE(lag) << lag.error().message;
  EXPECT_EQ(*lag, std::nullopt);
}

TEST_F(SqsSourceTest, ack_deletes_what_it_can_and_names_the_failed_message_ids) {
  auto queue = create_queue("ackfail");
  send_many(queue, 2);
  auto source = source_for(queue);
  auto batch = receive_at_least(*source, 2);
  ASSERT_EQ(batch.size(), 2u);
  Message stale = batch[1];
  std::get<SqsCoordinates>(stale.coordinates).receipt_handle = "stale-handle";

  auto r = source->ack({batch[0], stale});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(r.error().message.find(id_of(stale)), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("ReceiptHandleIsInvalid"), std::string::npos);
  EXPECT_EQ(r.error().message.find(id_of(batch[0])), std::string::npos);
  // The good one was deleted: only the stale-acked message is still owed.
  auto lag = source->lag(std::chrono::steady_clock::now() + 5s);
  ASSERT_TRUE(lag);
  EXPECT_EQ(*lag, 1);
}

TEST_F(SqsSourceTest, ack_refuses_messages_from_another_queue) {
  auto queue = create_queue("mine");
  auto source = source_for(queue);
  Message foreign{.coordinates = SqsCoordinates{
                      .queue_url = queue + "-other", .message_id = "m", .receipt_handle = "h"}};
  auto r = source->ack({foreign});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kInternal);
}

TEST_F(SqsSourceTest, connect_probe_reports_the_redrive_target_as_destination) {
  auto q = create_redriven_queue("probe", 2);
  auto source = SqsSource::connect(connect_config(q.queue));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->dead_letter_destination(), q.dlq_arn);
}

TEST_F(SqsSourceTest, connect_probe_without_redrive_policy_reports_none) {
  auto queue = create_queue("plain");
  log::LogCapture capture;
  auto source = SqsSource::connect(connect_config(queue));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->dead_letter_destination(), std::nullopt);
  EXPECT_EQ(capture.count_containing(queue), 0u);
}

TEST_F(SqsSourceTest, connect_probe_failure_on_a_missing_queue_warns_and_reports_none) {
  const std::string missing = endpoint() + "/000000000000/" + unique_name("missing");
  log::LogCapture capture;
  auto source = SqsSource::connect(connect_config(missing));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->dead_letter_destination(), std::nullopt);
  EXPECT_TRUE(capture.contains({missing, "RedrivePolicy", "QueueDoesNotExist"}))
      << ::testing::PrintToString(capture.messages());
}

TEST_F(SqsSourceTest, constructor_reports_a_destination_only_when_declared) {
  auto q = create_redriven_queue("declared", 2);
  // Synchronous: it cannot probe, so the real policy does not count...
  SqsSource undeclared(client(), SqsSourceConfig(q.queue));
  EXPECT_EQ(undeclared.dead_letter_destination(), std::nullopt);
  // ...only the declaration does.
  SqsSource declared(client(), SqsSourceConfig(q.queue).has_redrive_policy(true));
  ASSERT_TRUE(declared.dead_letter_destination().has_value());
  EXPECT_NE(declared.dead_letter_destination()->find(q.queue), std::string::npos);
}

TEST_F(SqsSourceTest, connect_uses_the_ambient_environment_for_endpoint_region_and_credentials) {
  auto queue = create_queue("ambient");
  send_many(queue, 1);
  testing::IsolatedAwsEnv env;
  env.set("AWS_ENDPOINT_URL_SQS", endpoint());
  env.set("AWS_REGION", "us-east-1");
  env.set("AWS_ACCESS_KEY_ID", "x");
  env.set("AWS_SECRET_ACCESS_KEY", "x");
  auto source = SqsSource::connect(SqsSourceConfig(queue));
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->client()->endpoint(), endpoint());
  auto batch = receive_at_least(**source, 1);
  EXPECT_EQ(batch.size(), 1u);
}

TEST_F(SqsSourceTest, abandoned_poison_moves_to_the_dlq_after_max_receive_count) {
  auto q = create_redriven_queue("poison", 2);
  auto sent = send_many(q.queue, 1, "poison");
  auto source_result = SqsSource::connect(connect_config(q.queue).visibility_timeout_secs(120));
  ASSERT_TRUE(source_result) << source_result.error().message;
  auto& source = **source_result;
  ASSERT_TRUE(source.dead_letter_destination());

  for (int expected_count = 1; expected_count <= 2; ++expected_count) {
    auto batch = receive_at_least(source, 1);
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch[0].receive_count, expected_count);
    ASSERT_TRUE(source.abandon(batch));
  }
  // The move is lazy: the receive after the last allowed one moves the
  // message to the DLQ and returns nothing.
  auto none = source.receive(1, 1s);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());

  auto dlq = std::make_shared<SqsSource>(client(), SqsSourceConfig(q.dlq));
  auto moved = receive_at_least(*dlq, 1);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(id_of(moved[0]), sent[0]);
  EXPECT_EQ(moved[0].payload, "poison0");
  auto lag = source.lag(std::chrono::steady_clock::now() + 5s);
  ASSERT_TRUE(lag);
  EXPECT_EQ(*lag, 0);
}

}  // namespace
}  // namespace harvest::sqs

namespace harvest::sqs {
namespace {

// Receive-ahead, for throughput: the next ReceiveMessage overlaps the
// runtime's dispatch of the current batch.
class SqsReceiveAheadTest : public testing::SqsServerTest {
 protected:
  long long visible(const std::string& queue) {
    auto attrs = client()->get_queue_attributes(queue, {"ApproximateNumberOfMessages"});
    EXPECT_TRUE(attrs) << attrs.error().message;
    return attrs ? std::stoll(attrs->at("ApproximateNumberOfMessages")) : -1;
  }
  static std::string id_of(const connector::Message& m) {
    return std::get<connector::SqsCoordinates>(m.coordinates).message_id;
  }
  bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return pred();
  }
};

TEST_F(SqsReceiveAheadTest,
       a_full_batch_sends_the_next_receive_ahead_and_every_message_arrives_once) {
  auto queue = create_queue("ahead");
  ASSERT_EQ(send_many(queue, 25).size(), 25u);
  auto source =
      std::make_shared<SqsSource>(client(), SqsSourceConfig(queue).visibility_timeout_secs(60));
  std::set<std::string> ids;
  auto first = source->receive(10, 2s);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(first->size(), 10u);
  for (const auto& m : *first) ids.insert(id_of(m));
  // Nothing else calls the queue: only the call sent ahead can take ten more.
  ASSERT_TRUE(eventually([&] { return visible(queue) == 5; }))
      << "visible: " << visible(queue) << " (the next batch was not received ahead)";
  auto second = source->receive(10, 2s);
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ(second->size(), 10u) << "the next receive starts from the answer sent ahead";
  for (const auto& m : *second) ids.insert(id_of(m));
  auto third = source->receive(10, 2s);
  ASSERT_TRUE(third) << third.error().message;
  ASSERT_EQ(third->size(), 5u);
  for (const auto& m : *third) ids.insert(id_of(m));
  EXPECT_EQ(ids.size(), 25u) << "every message exactly once";
  ASSERT_TRUE(source->ack(*first) && source->ack(*second) && source->ack(*third));
  EXPECT_EQ(visible(queue), 0);
}

TEST_F(SqsReceiveAheadTest, destroying_the_source_releases_what_it_received_ahead) {
  auto queue = create_queue("ahead-release");
  ASSERT_EQ(send_many(queue, 15).size(), 15u);
  {
    auto source =
        std::make_shared<SqsSource>(client(), SqsSourceConfig(queue).visibility_timeout_secs(600));
    auto first = source->receive(10, 2s);
    ASSERT_TRUE(first && first->size() == 10u);
    ASSERT_TRUE(source->ack(*first));
    ASSERT_TRUE(eventually([&] { return visible(queue) == 0; })) << "five received ahead";
  }
  // Released at visibility 0, not left invisible for the 600 s timeout.
  EXPECT_TRUE(eventually([&] { return visible(queue) == 5; }))
      << "visible after the source went: " << visible(queue);
}

TEST_F(SqsReceiveAheadTest, receive_ahead_can_be_turned_off) {
  auto queue = create_queue("no-ahead");
  ASSERT_EQ(send_many(queue, 25).size(), 25u);
  auto source = std::make_shared<SqsSource>(
      client(), SqsSourceConfig(queue).visibility_timeout_secs(60).receive_ahead(false));
  auto first = source->receive(10, 2s);
  ASSERT_TRUE(first && first->size() == 10u);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(visible(queue), 15) << "nothing received behind the caller's back";
}

}  // namespace
}  // namespace harvest::sqs
