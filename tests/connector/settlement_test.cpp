// The settlement plan of a dispatched batch (settlement.hpp): what is acked,
// handed back and held, which counters move (CON-13) and when a store outage
// begins — pinned without a source or a database. ConnectorRuntime::settle
// only applies it.
#include <gtest/gtest.h>

#include <ostream>

#include <harvest/connector/settlement.hpp>

namespace harvest::connector {

// Readable failures: a plan prints as its steps, hand-backs and counts.
void PrintTo(const Count& c, std::ostream* os) {
  static constexpr const char* kCounters[] = {"dispatched", "dead_lettered", "retried"};
  *os << kCounters[static_cast<int>(c.counter)] << "{" << to_string(c.label) << "} += " << c.n;
}

void PrintTo(const SettlementPlan& p, std::ostream* os) {
  auto counts = [os](const char* name, const std::vector<Count>& cs) {
    *os << "\n  " << name << ":";
    for (const Count& c : cs) {
      *os << " ";
      PrintTo(c, os);
      *os << ";";
    }
  };
  *os << "steps:";
  for (Step s : p.steps) *os << " " << static_cast<int>(s);
  *os << "\n  abandon:";
  for (size_t i : p.abandon) *os << " " << i;
  counts("counts", p.counts);
  counts("if_acked", p.if_acked);
  counts("if_ack_failed", p.if_ack_failed);
  counts("if_handed_back", p.if_handed_back);
  counts("if_hand_back_failed", p.if_hand_back_failed);
  *os << "\n  acked: " << p.acked << ", enter_store_outage: " << p.enter_store_outage;
}

namespace {

Dispatched settled(DispatchOutcome o) {
  return {Verdict::kSettled, o};
}
Dispatched dead_lettered(DeadLetterReason r) {
  return {Verdict::kDeadLettered, r};
}
Dispatched handed_back(DeadLetterReason r) {
  return {Verdict::kHandedBack, r, true};
}
Dispatched retry(Label r, bool fast = false) {
  return {Verdict::kRetry, r, fast};
}
Dispatched store_down() {
  return {Verdict::kHold, RetryReason::kStoreUnavailable};
}
Dispatched collision(std::string report) {
  return {.verdict = Verdict::kCollisionHold, .detail = std::move(report)};
}

// A Kafka-like delivery (it has a commit ticket) and an SQS-like one.
constexpr Delivery kOrdered{.positional = true};
Delivery redelivered(int receive_count) {
  return {.positional = false, .receive_count = receive_count};
}
constexpr Delivery kQueued = {};

TEST(Settlement, the_stored_and_labelled_strings_never_change) {
  EXPECT_EQ(to_string(DispatchOutcome::kDispatched), "dispatched");
  EXPECT_EQ(to_string(DispatchOutcome::kIdempotentReplay), "idempotent_replay");
  EXPECT_EQ(to_string(DispatchOutcome::kDeferred), "deferred");
  EXPECT_EQ(to_string(DeadLetterReason::kUndecodable), "undecodable");
  EXPECT_EQ(to_string(DeadLetterReason::kMappingRejected), "mapping_rejected");
  EXPECT_EQ(to_string(DeadLetterReason::kStartRejected), "start_rejected");
  EXPECT_EQ(to_string(DeadLetterReason::kCoordinateCollision), "coordinate_collision");
  EXPECT_EQ(to_string(RetryReason::kTransient), "transient");
  EXPECT_EQ(to_string(RetryReason::kDeadLetterFailed), "dead_letter_failed");
  EXPECT_EQ(to_string(RetryReason::kStoreUnavailable), "store_unavailable");
  EXPECT_EQ(to_string(RetryReason::kAckFailed), "ack_failed");
  EXPECT_EQ(to_string(Label{DeadLetterReason::kUndecodable}), "undecodable");
}

TEST(Settlement, an_empty_batch_does_nothing) {
  EXPECT_EQ(plan_settlement({}, {}, std::nullopt), SettlementPlan{});
}

TEST(Settlement, an_all_started_batch_is_acked_and_counted_once_the_ack_lands) {
  const auto plan =
      plan_settlement({settled(DispatchOutcome::kDispatched), settled(DispatchOutcome::kDispatched),
                       settled(DispatchOutcome::kDispatched)},
                      {kOrdered, kOrdered, kOrdered}, std::nullopt);
  EXPECT_EQ(plan, (SettlementPlan{
                      .steps = {Step::kSettle, Step::kSettle, Step::kSettle},
                      .if_acked = {{Counter::kDispatched, DispatchOutcome::kDispatched, 3}},
                      .if_ack_failed = {{Counter::kRetried, RetryReason::kAckFailed, 3}},
                      .acked = 3,
                  }));
}

TEST(Settlement, messages_without_a_position_are_acked_on_their_own) {
  const auto plan = plan_settlement(
      {settled(DispatchOutcome::kDispatched), dead_lettered(DeadLetterReason::kUndecodable)},
      {kQueued, kQueued}, std::nullopt);
  EXPECT_EQ(plan.steps, (std::vector<Step>{Step::kAck, Step::kAck}));
  EXPECT_EQ(plan.acked, 2u);
}

TEST(Settlement, counters_are_summed_per_outcome_in_the_order_they_first_appear) {
  const auto plan = plan_settlement(
      {settled(DispatchOutcome::kIdempotentReplay), settled(DispatchOutcome::kDispatched),
       dead_lettered(DeadLetterReason::kStartRejected), settled(DispatchOutcome::kDeferred),
       settled(DispatchOutcome::kIdempotentReplay), dead_lettered(DeadLetterReason::kStartRejected),
       dead_lettered(DeadLetterReason::kUndecodable)},
      std::vector<Delivery>(7, kOrdered), std::nullopt);
  EXPECT_EQ(plan.if_acked,
            (std::vector<Count>{{Counter::kDispatched, DispatchOutcome::kIdempotentReplay, 2},
                                {Counter::kDispatched, DispatchOutcome::kDispatched, 1},
                                {Counter::kDeadLettered, DeadLetterReason::kStartRejected, 2},
                                {Counter::kDispatched, DispatchOutcome::kDeferred, 1},
                                {Counter::kDeadLettered, DeadLetterReason::kUndecodable, 1}}));
  EXPECT_EQ(plan.if_ack_failed,
            (std::vector<Count>{{Counter::kRetried, RetryReason::kAckFailed, 7}}));
  EXPECT_TRUE(plan.counts.empty()) << "nothing is counted before the broker answers";
}

TEST(Settlement, a_mixed_batch_acks_hands_back_holds_and_retries_each_message_its_way) {
  const auto plan = plan_settlement(
      {
          settled(DispatchOutcome::kDispatched),                     // 0 acked
          dead_lettered(DeadLetterReason::kMappingRejected),         // 1 acked
          retry(RetryReason::kTransient),                            // 2 left to redeliver
          retry(DeadLetterReason::kMappingRejected, /*fast=*/true),  // 3 handed back now
          retry(RetryReason::kDeadLetterFailed),                     // 4 (sink refused)
          store_down(),                                              // 5 held
          collision("binding 'b' holds on a coordinate collision"),  // 6 reports
          collision(""),                                             // 7 behind it
          settled(DispatchOutcome::kDeferred),                       // 8 acked
      },
      std::vector<Delivery>(9, kOrdered), std::nullopt);
  EXPECT_EQ(plan,
            (SettlementPlan{
                .steps = {Step::kSettle, Step::kSettle, Step::kRetry, Step::kRetry, Step::kRetry,
                          Step::kHold, Step::kReportCollision, Step::kNone, Step::kSettle},
                .abandon = {3},
                .counts = {{Counter::kRetried, RetryReason::kTransient, 1},
                           {Counter::kRetried, DeadLetterReason::kMappingRejected, 1},
                           {Counter::kRetried, RetryReason::kDeadLetterFailed, 1},
                           {Counter::kRetried, RetryReason::kStoreUnavailable, 1}},
                .if_acked = {{Counter::kDispatched, DispatchOutcome::kDispatched, 1},
                             {Counter::kDeadLettered, DeadLetterReason::kMappingRejected, 1},
                             {Counter::kDispatched, DispatchOutcome::kDeferred, 1}},
                .if_ack_failed = {{Counter::kRetried, RetryReason::kAckFailed, 3}},
                .acked = 3,
                .enter_store_outage = true,
            }));
}

TEST(Settlement, broker_native_poison_is_dead_lettered_on_the_hand_back_that_reaches_the_limit) {
  const auto plan = plan_settlement(
      {handed_back(DeadLetterReason::kUndecodable), handed_back(DeadLetterReason::kUndecodable),
       handed_back(DeadLetterReason::kStartRejected), settled(DispatchOutcome::kDispatched)},
      {redelivered(1), redelivered(3), redelivered(5), kQueued}, /*redrive_max_receives=*/3);
  EXPECT_EQ(plan,
            (SettlementPlan{
                .steps = {Step::kNone, Step::kNone, Step::kNone, Step::kAck},
                .abandon = {0, 1, 2},
                .if_acked = {{Counter::kDispatched, DispatchOutcome::kDispatched, 1}},
                .if_ack_failed = {{Counter::kRetried, RetryReason::kAckFailed, 1}},
                .if_handed_back = {{Counter::kRetried, DeadLetterReason::kUndecodable, 1},
                                   {Counter::kDeadLettered, DeadLetterReason::kUndecodable, 1},
                                   {Counter::kDeadLettered, DeadLetterReason::kStartRejected, 1}},
                .if_hand_back_failed = {{Counter::kRetried, DeadLetterReason::kUndecodable, 2},
                                        {Counter::kRetried, DeadLetterReason::kStartRejected, 1}},
                .acked = 1,
            }));
}

TEST(Settlement, with_the_redrive_limit_unknown_every_hand_back_is_a_dead_letter) {
  const auto plan = plan_settlement({handed_back(DeadLetterReason::kMappingRejected)},
                                    {redelivered(1)}, std::nullopt);
  EXPECT_EQ(plan.if_handed_back,
            (std::vector<Count>{{Counter::kDeadLettered, DeadLetterReason::kMappingRejected, 1}}));
  EXPECT_EQ(plan.if_hand_back_failed,
            (std::vector<Count>{{Counter::kRetried, DeadLetterReason::kMappingRejected, 1}}));
  EXPECT_TRUE(plan.if_acked.empty());
  EXPECT_TRUE(plan.if_ack_failed.empty()) << "nothing to ack, so no ack can fail";
}

TEST(Settlement, an_unreachable_store_holds_ordered_messages_and_begins_the_outage) {
  const auto plan = plan_settlement({settled(DispatchOutcome::kDispatched), store_down(),
                                     store_down(), retry(RetryReason::kTransient)},
                                    {kOrdered, kOrdered, kOrdered, kOrdered}, std::nullopt);
  EXPECT_EQ(plan.steps, (std::vector<Step>{Step::kSettle, Step::kHold, Step::kHold, Step::kRetry}));
  EXPECT_EQ(plan.counts, (std::vector<Count>{{Counter::kRetried, RetryReason::kStoreUnavailable, 2},
                                             {Counter::kRetried, RetryReason::kTransient, 1}}));
  EXPECT_TRUE(plan.enter_store_outage);
}

TEST(Settlement, a_redelivering_broker_keeps_what_the_store_could_not_take) {
  // SQS: nothing is held (the broker hands it back after the visibility
  // timeout), but the outage begins all the same.
  const auto plan = plan_settlement({store_down()}, {kQueued}, std::nullopt);
  EXPECT_EQ(plan, (SettlementPlan{
                      .steps = {Step::kNone},
                      .counts = {{Counter::kRetried, RetryReason::kStoreUnavailable, 1}},
                      .enter_store_outage = true,
                  }));
}

TEST(Settlement, a_batch_the_store_took_begins_no_outage) {
  // Leaving an outage is the store probe's business (StoreOutage::probed):
  // the held messages it dispatches again settle like any others, and a
  // successful settlement never re-enters the outage.
  const auto plan =
      plan_settlement({settled(DispatchOutcome::kDispatched), retry(RetryReason::kTransient)},
                      {kOrdered, kOrdered}, std::nullopt);
  EXPECT_FALSE(plan.enter_store_outage);
}

TEST(Settlement, a_collision_hold_is_neither_acked_nor_counted) {
  const auto plan = plan_settlement({collision("report"), collision(""), collision("another")},
                                    {kOrdered, kOrdered, kOrdered}, std::nullopt);
  EXPECT_EQ(
      plan,
      (SettlementPlan{.steps = {Step::kReportCollision, Step::kNone, Step::kReportCollision}}));
}

TEST(Settlement, a_fast_retry_without_a_position_is_only_handed_back) {
  const auto plan = plan_settlement(
      {retry(DeadLetterReason::kMappingRejected, true), retry(RetryReason::kTransient)},
      {kQueued, kQueued}, std::nullopt);
  EXPECT_EQ(plan, (SettlementPlan{
                      .steps = {Step::kNone, Step::kNone},
                      .abandon = {0},
                      .counts = {{Counter::kRetried, DeadLetterReason::kMappingRejected, 1},
                                 {Counter::kRetried, RetryReason::kTransient, 1}},
                  }));
}

}  // namespace
}  // namespace harvest::connector
