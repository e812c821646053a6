#include <iterator>

#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/settlement.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector {

namespace {

// The stored reasons are one list: what the runtime writes is what the
// dead-letter store filters on and the API shows.
constexpr bool reasons_match_the_store() {
  constexpr DeadLetterReason kAll[] = {
      DeadLetterReason::kUndecodable, DeadLetterReason::kMappingRejected,
      DeadLetterReason::kStartRejected, DeadLetterReason::kCoordinateCollision};
  if (std::size(kAll) != std::size(connector_dlq::kReasons)) return false;
  for (size_t i = 0; i < std::size(kAll); ++i) {
    if (to_string(kAll[i]) != connector_dlq::kReasons[i]) return false;
  }
  return to_string(DeadLetterReason::kCoordinateCollision) == kCollisionReason;
}
static_assert(reasons_match_the_store(),
              "DeadLetterReason must match connector_dlq::kReasons and kCollisionReason");

// Adds `n` to `counter` under `label`: to the entry already there, or as a
// new one at the end (so counts keep the order they first appear in).
void add(std::vector<Count>& counts, Counter counter, Label label, size_t n = 1) {
  for (Count& c : counts) {
    if (c.counter == counter && c.label == label) {
      c.n += n;
      return;
    }
  }
  counts.push_back({counter, label, n});
}

}  // namespace

SettlementPlan plan_settlement(const std::vector<Dispatched>& results,
                               const std::vector<Delivery>& deliveries,
                               std::optional<int> redrive_max_receives) {
  SettlementPlan plan;
  plan.steps.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Dispatched& d = results[i];
    const Delivery& at = deliveries[i];
    Step step = Step::kNone;
    switch (d.verdict) {
      case Verdict::kSettled:
      case Verdict::kDeadLettered:
        // Counted once the ack lands (if_acked), not now.
        step = at.positional ? Step::kSettle : Step::kAck;
        add(plan.if_acked,
            d.verdict == Verdict::kDeadLettered ? Counter::kDeadLettered : Counter::kDispatched,
            d.label);
        ++plan.acked;
        break;
      case Verdict::kHandedBack: {
        // Poison the broker's redrive policy owns: one dead letter per
        // message, on the hand-back that reaches maxReceiveCount (the broker
        // moves it on its next receive). Earlier hand-backs, and a hand-back
        // that failed (the message comes back after its visibility timeout),
        // are retries. With the limit unknown, every hand-back counts.
        plan.abandon.push_back(i);
        const bool last = !redrive_max_receives || at.receive_count >= *redrive_max_receives;
        add(plan.if_handed_back, last ? Counter::kDeadLettered : Counter::kRetried, d.label);
        add(plan.if_hand_back_failed, Counter::kRetried, d.label);
        break;
      }
      case Verdict::kHold:
        // Not the message's fault and not a stall: a positional message is
        // held (unacked) for dispatch once the store answers; a redelivering
        // broker hands the rest back by itself.
        add(plan.counts, Counter::kRetried, d.label);
        if (at.positional) step = Step::kHold;
        plan.enter_store_outage = true;
        break;
      case Verdict::kCollisionHold:
        // Neither acked nor retried: its partition commits nothing past it.
        // The collision itself carries the report; what follows it on its
        // partition is held with it.
        if (!d.detail.empty()) step = Step::kReportCollision;
        break;
      case Verdict::kRetry:
        add(plan.counts, Counter::kRetried, d.label);
        if (at.positional) step = Step::kRetry;
        if (d.fast_retry) plan.abandon.push_back(i);
        break;
    }
    plan.steps.push_back(step);
  }
  // Durable in harvest but not acked: the broker redelivers and the
  // redelivery dedupes to the same execution.
  if (plan.acked > 0) {
    add(plan.if_ack_failed, Counter::kRetried, RetryReason::kAckFailed, plan.acked);
  }
  return plan;
}

}  // namespace harvest::connector
