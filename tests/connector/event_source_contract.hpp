// The EventSource contract: one typed test suite every source must pass
// (MockSource here; KafkaSource and SqsSource against their real servers).
//
// A harness type H provides, for a fresh single-partition stream:
//   static constexpr const char* kName;
//   std::shared_ptr<EventSource> open();       // a consumer on the stream's subscription
//   void produce(const std::vector<std::string>& payloads);
//   void close(std::shared_ptr<EventSource>&); // release a consumer before reopening
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include <harvest/connector/event_source.hpp>

namespace harvest::connector::contract {

using namespace std::chrono_literals;

// Receives until `n` messages arrived or `within` passed.
inline std::vector<Message> receive_n(EventSource& s, size_t n,
                                      std::chrono::milliseconds within = 20s) {
  std::vector<Message> out;
  auto deadline = std::chrono::steady_clock::now() + within;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    auto batch = s.receive(n - out.size(), 500ms);
    EXPECT_TRUE(batch) << batch.error().message;
    if (!batch) break;
    for (auto& m : *batch) out.push_back(std::move(m));
  }
  return out;
}

template <typename H>
class EventSourceContract : public ::testing::Test {
 protected:
  H h;
};
TYPED_TEST_SUITE_P(EventSourceContract);

TYPED_TEST_P(EventSourceContract, receives_every_produced_payload_once_with_coordinates) {
  auto s = this->h.open();
  this->h.produce({"one", "two", "three"});
  auto got = receive_n(*s, 3);
  ASSERT_EQ(got.size(), 3u);
  std::multiset<std::string> payloads;
  for (const auto& m : got) {
    payloads.insert(m.payload);
    EXPECT_EQ(render(m.coordinates).empty(), false);
    EXPECT_GE(m.receive_count, 1);
  }
  EXPECT_EQ(payloads, (std::multiset<std::string>{"one", "two", "three"}));
  if (std::holds_alternative<KafkaCoordinates>(got[0].coordinates)) {
    // One partition: broker order and consecutive offsets.
    for (size_t i = 1; i < got.size(); ++i) {
      EXPECT_EQ(std::get<KafkaCoordinates>(got[i].coordinates).offset,
                std::get<KafkaCoordinates>(got[i - 1].coordinates).offset + 1);
    }
  }
}

TYPED_TEST_P(EventSourceContract, acked_messages_are_not_delivered_to_the_subscription_again) {
  auto s = this->h.open();
  this->h.produce({"a", "b"});
  auto got = receive_n(*s, 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(s->ack(got));
  this->h.close(s);
  auto again = this->h.open();
  this->h.produce({"c"});
  auto next = receive_n(*again, 1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].payload, "c");
  auto nothing = again->receive(10, 1s);
  ASSERT_TRUE(nothing);
  EXPECT_TRUE(nothing->empty()) << "an acked message came back";
}

TYPED_TEST_P(EventSourceContract, an_idle_receive_returns_empty_within_its_timeout) {
  auto s = this->h.open();
  auto t0 = std::chrono::steady_clock::now();
  auto r = s->receive(10, 1s);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);
}

TYPED_TEST_P(EventSourceContract, identity_and_stream_are_stable_and_named) {
  auto s = this->h.open();
  EXPECT_FALSE(s->subscription_identity().empty());
  EXPECT_FALSE(s->stream().empty());
  EXPECT_EQ(s->subscription_identity(), s->subscription_identity());
}

TYPED_TEST_P(EventSourceContract, abandon_hands_back_exactly_when_it_says_it_redelivers) {
  auto s = this->h.open();
  this->h.produce({"x"});
  auto got = receive_n(*s, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(s->abandon(got));
  if (s->abandon_redelivers()) {
    auto back = receive_n(*s, 1);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].payload, "x");
    EXPECT_GE(back[0].receive_count, 2);
    ASSERT_TRUE(s->ack(back));
  } else {
    auto r = s->receive(10, 1s);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->empty()) << "abandon must be a no-op on a positional source";
  }
}

TYPED_TEST_P(EventSourceContract, lag_counts_the_work_still_owed) {
  auto s = this->h.open();
  this->h.produce({"1", "2", "3", "4"});
  auto got = receive_n(*s, 4);
  ASSERT_EQ(got.size(), 4u);
  // Settle the first two (a positional source commits the prefix through #2).
  ASSERT_TRUE(s->ack({got[0], got[1]}));
  std::optional<int64_t> lag;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = s->lag(std::chrono::steady_clock::now() + 5s);
    ASSERT_TRUE(r) << r.error().message;
    lag = *r;
    if (lag == 2) break;
  }
  EXPECT_EQ(lag, 2);
}

REGISTER_TYPED_TEST_SUITE_P(EventSourceContract,
                            receives_every_produced_payload_once_with_coordinates,
                            acked_messages_are_not_delivered_to_the_subscription_again,
                            an_idle_receive_returns_empty_within_its_timeout,
                            identity_and_stream_are_stable_and_named,
                            abandon_hands_back_exactly_when_it_says_it_redelivers,
                            lag_counts_the_work_still_owed);

}  // namespace harvest::connector::contract
