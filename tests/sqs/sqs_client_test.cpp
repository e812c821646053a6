// SQS-4 (client level): the SQS client against the real SQS-compatible server
// (ElasticMQ, started by scripts/services/sqs.sh).
#include <gtest/gtest.h>

#include "sqs_server_test.hpp"

namespace harvest::sqs {
namespace {

class SqsClientTest : public testing::SqsServerTest {};

TEST_F(SqsClientTest, send_receive_delete_round_trip) {
  auto queue = create_queue("roundtrip");
  auto id = client()->send_message(
      queue, {.body = "hello",
              .message_attributes = {
                  {.name = "kind", .data_type = "String", .string_value = "greeting"}}});
  ASSERT_TRUE(id) << id.error().message;

  auto received =
      client()->receive_message({.queue_url = queue, .max_messages = 10, .wait_time_secs = 5});
  ASSERT_TRUE(received) << received.error().message;
  ASSERT_EQ(received->size(), 1u);
  const SqsMessage& m = received->front();
  EXPECT_EQ(m.message_id, *id);
  EXPECT_EQ(m.body, "hello");
  EXPECT_EQ(m.md5_of_body, "5d41402abc4b2a76b9719d911017c592");
  EXPECT_EQ(m.attributes.at("ApproximateReceiveCount"), "1");
  EXPECT_TRUE(m.attributes.contains("SentTimestamp"));
  ASSERT_EQ(m.message_attributes.size(), 1u);
  EXPECT_EQ(m.message_attributes[0].name, "kind");
  EXPECT_EQ(m.message_attributes[0].data_type, "String");
  EXPECT_EQ(m.message_attributes[0].string_value, "greeting");
  EXPECT_FALSE(m.receipt_handle.empty());

  ASSERT_TRUE(client()->delete_message(queue, m.receipt_handle));
  auto attrs = client()->get_queue_attributes(
      queue, {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"});
  ASSERT_TRUE(attrs) << attrs.error().message;
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessages"), "0");
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessagesNotVisible"), "0");
}

TEST_F(SqsClientTest, delete_batch_with_a_bogus_receipt_handle_reports_failed_on_http_200) {
  auto queue = create_queue("delbatch");
  ASSERT_TRUE(client()->send_message(queue, {.body = "a"}));
  auto received =
      client()->receive_message({.queue_url = queue, .max_messages = 1, .wait_time_secs = 5});
  ASSERT_TRUE(received) << received.error().message;
  ASSERT_EQ(received->size(), 1u);

  auto r = client()->delete_message_batch(
      queue, {{.id = "good", .receipt_handle = received->front().receipt_handle},
              {.id = "bogus", .receipt_handle = "not-a-receipt-handle"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->successful, std::vector<std::string>{"good"});
  ASSERT_EQ(r->failed.size(), 1u);
  EXPECT_EQ(r->failed[0].id, "bogus");
  EXPECT_EQ(r->failed[0].code, "ReceiptHandleIsInvalid");
  EXPECT_TRUE(r->failed[0].sender_fault);
}

TEST_F(SqsClientTest, change_visibility_zero_makes_a_message_reappear) {
  auto queue = create_queue("visibility");
  auto id = client()->send_message(queue, {.body = "again"});
  ASSERT_TRUE(id);
  auto first = client()->receive_message(
      {.queue_url = queue, .max_messages = 1, .wait_time_secs = 5, .visibility_timeout_secs = 60});
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(first->size(), 1u);
  // In flight for 60 s: a short poll sees nothing.
  auto hidden = client()->receive_message({.queue_url = queue, .max_messages = 1});
  ASSERT_TRUE(hidden);
  EXPECT_TRUE(hidden->empty());

  ASSERT_TRUE(client()->change_message_visibility(queue, first->front().receipt_handle, 0));
  auto again =
      client()->receive_message({.queue_url = queue, .max_messages = 1, .wait_time_secs = 5});
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ(again->front().message_id, *id);
  EXPECT_EQ(again->front().attributes.at("ApproximateReceiveCount"), "2");
}

TEST_F(SqsClientTest, get_queue_attributes_counts_visible_and_in_flight) {
  auto queue = create_queue("counts");
  send_many(queue, 3);
  auto received = client()->receive_message(
      {.queue_url = queue, .max_messages = 1, .wait_time_secs = 5, .visibility_timeout_secs = 60});
  ASSERT_TRUE(received);
  ASSERT_EQ(received->size(), 1u);
  auto attrs = client()->get_queue_attributes(queue, {"All"});
  ASSERT_TRUE(attrs) << attrs.error().message;
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessages"), "2");
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessagesNotVisible"), "1");
  EXPECT_TRUE(attrs->at("QueueArn").ends_with(":" + queue.substr(queue.rfind('/') + 1)));
}

TEST_F(SqsClientTest, change_visibility_batch_and_set_queue_attributes) {
  auto queue = create_queue("visbatch");
  ASSERT_TRUE(client()->set_queue_attributes(queue, {{"VisibilityTimeout", "45"}}));
  auto attrs = client()->get_queue_attributes(queue, {"VisibilityTimeout"});
  ASSERT_TRUE(attrs);
  EXPECT_EQ(attrs->at("VisibilityTimeout"), "45");

  send_many(queue, 2);
  auto received =
      client()->receive_message({.queue_url = queue, .max_messages = 2, .wait_time_secs = 5});
  ASSERT_TRUE(received);
  ASSERT_EQ(received->size(), 2u);
  auto r = client()->change_message_visibility_batch(
      queue,
      {{.id = "a", .receipt_handle = (*received)[0].receipt_handle, .visibility_timeout_secs = 0},
       {.id = "b", .receipt_handle = "bogus", .visibility_timeout_secs = 0}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->successful, std::vector<std::string>{"a"});
  ASSERT_EQ(r->failed.size(), 1u);
  EXPECT_EQ(r->failed[0].id, "b");
}

TEST_F(SqsClientTest, missing_queue_is_not_found_and_queue_lifecycle_calls_work) {
  auto missing = client()->get_queue_url(unique_name("never-created"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);

  auto queue = create_queue("lifecycle");
  auto name = queue.substr(queue.rfind('/') + 1);
  auto url = client()->get_queue_url(name);
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(*url, queue);
  send_many(queue, 4);
  ASSERT_TRUE(client()->purge_queue(queue));
  auto attrs = client()->get_queue_attributes(queue, {"ApproximateNumberOfMessages"});
  ASSERT_TRUE(attrs);
  EXPECT_EQ(attrs->at("ApproximateNumberOfMessages"), "0");
  ASSERT_TRUE(client()->delete_queue(queue));
  auto gone = client()->receive_message({.queue_url = queue, .max_messages = 1});
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::kNotFound);
}

}  // namespace
}  // namespace harvest::sqs
