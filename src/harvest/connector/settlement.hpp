// What the connector runtime decided for each message of a batch, and what
// settling the batch means, as a plan apart from doing it.
//
// Dispatch gives every message a `Dispatched`: a Verdict and the Label it is
// counted under (a DispatchOutcome, a DeadLetterReason or a RetryReason).
// `plan_settlement` turns a batch of them into a SettlementPlan: what each
// message does on the commit tracker or the store outage, what is acked and
// handed back, which counters are added (for each answer the broker may give
// to the ack and the hand-back), and whether a store outage begins.
// ConnectorRuntime::settle applies the plan: it is the only part that talks
// to the source, the tracker, the metrics and the log.
//
// The labels are enums everywhere inside the runtime and become strings only
// at its edges, through `to_string`: metric labels, log lines and the
// `reason` column of harvest_connector_dead_letters (which the API and the
// console show). Those strings are stored and must never change.
//
// Internal to the connector module. Plain values: thread-safe as values are.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace harvest::connector {

/// What a durable start or signal became: the "outcome" label of
/// harvest.connector.dispatched.
enum class DispatchOutcome {
  kDispatched,        ///< a new execution (or a signal delivered)
  kIdempotentReplay,  ///< the dedupe key already had its execution (or signal)
  kDeferred,          ///< accepted under deferred admission
};

/// Why a message is poison: the "reason" label of
/// harvest.connector.dead_lettered and the stored reason of its dead letter.
/// Same strings, same order as connector_dlq::kReasons (checked at compile
/// time in settlement.cpp).
enum class DeadLetterReason {
  kUndecodable,          ///< the mapper could not decode the payload
  kMappingRejected,      ///< the mapper rejected it poison_threshold times
  kStartRejected,        ///< the engine refused the start for good
  kCoordinateCollision,  ///< CollisionPolicy::kDeadLetter (kCollisionReason)
};

/// Why a message is left for redelivery when it is not (yet) poison: the
/// "reason" label of harvest.connector.retried. A retry on the poison path
/// (a rejected mapping below its threshold, a broker-native hand-back) is
/// counted under its DeadLetterReason instead.
enum class RetryReason {
  kTransient,         ///< not the message's fault (database error, a defect caught)
  kDeadLetterFailed,  ///< the dead-letter sink refused the write
  kStoreUnavailable,  ///< the store cannot be reached (a store outage)
  kAckFailed,         ///< durable in harvest, but the broker refused the ack
};

/// What a message is counted under: a DispatchOutcome for
/// harvest.connector.dispatched, a DeadLetterReason for dead_lettered, a
/// RetryReason or DeadLetterReason for retried.
using Label = std::variant<DispatchOutcome, DeadLetterReason, RetryReason>;

/// The strings of the labels: metric label values, log text and the stored
/// dead-letter reason. Never change one (dashboards and stored rows use them).
[[nodiscard]] constexpr std::string_view to_string(DispatchOutcome o) {
  switch (o) {
    case DispatchOutcome::kDispatched:
      return "dispatched";
    case DispatchOutcome::kIdempotentReplay:
      return "idempotent_replay";
    case DispatchOutcome::kDeferred:
      return "deferred";
  }
  return "unknown";
}
[[nodiscard]] constexpr std::string_view to_string(DeadLetterReason r) {
  switch (r) {
    case DeadLetterReason::kUndecodable:
      return "undecodable";
    case DeadLetterReason::kMappingRejected:
      return "mapping_rejected";
    case DeadLetterReason::kStartRejected:
      return "start_rejected";
    case DeadLetterReason::kCoordinateCollision:
      return "coordinate_collision";
  }
  return "unknown";
}
[[nodiscard]] constexpr std::string_view to_string(RetryReason r) {
  switch (r) {
    case RetryReason::kTransient:
      return "transient";
    case RetryReason::kDeadLetterFailed:
      return "dead_letter_failed";
    case RetryReason::kStoreUnavailable:
      return "store_unavailable";
    case RetryReason::kAckFailed:
      return "ack_failed";
  }
  return "unknown";
}
[[nodiscard]] constexpr std::string_view to_string(const Label& r) {
  return std::visit([](auto v) { return to_string(v); }, r);
}

/// What dispatch decided for one message.
enum class Verdict {
  kSettled,       ///< durably started or signalled: acked
  kDeadLettered,  ///< recorded in the dead-letter sink: acked
  /// Poison a broker-native dead letter owns: handed back, so the broker's
  /// receive count climbs to its redrive limit.
  kHandedBack,
  kRetry,  ///< left unacked for the broker to redeliver
  /// The store is unreachable — not the message's fault: the message is held
  /// (positional) or left to the broker, and intake pauses.
  kHold,
  /// A coordinate collision under CollisionPolicy::kHold (or a message behind
  /// one on its partition): unacked and unsettled, and intake stops.
  kCollisionHold,
};

/// One message's verdict and the label it is counted under.
struct Dispatched {
  Verdict verdict = Verdict::kRetry;
  /// kSettled: a DispatchOutcome. kDeadLettered, kHandedBack: a DeadLetterReason.
  /// kRetry: a RetryReason, or the DeadLetterReason of a rejected mapping
  /// below its poison threshold. kHold: RetryReason::kStoreUnavailable.
  /// kCollisionHold: unused (`detail` is the report).
  Label label = RetryReason::kTransient;
  bool fast_retry = false;  ///< hand back now (poison path), not at the broker's pace
  /// kCollisionHold: the report, ready to show; empty for a message held
  /// behind a collision (the collision itself reports).
  std::string detail = {};
};

/// What settlement needs of a message besides its verdict.
struct Delivery {
  bool positional = false;  ///< it has a commit ticket (CommitTracker): an ordered log
  int receive_count = 1;    ///< Message::receive_count
};

/// What settling does with one message, in batch order (the commit
/// tracker's bookkeeping depends on that order).
enum class Step {
  kNone,    ///< nothing of its own: handed back, or left to the broker or behind a collision
  kAck,     ///< acked on its own (no position)
  kSettle,  ///< settled on the commit tracker; its partition's new commit point is acked
  kRetry,   ///< marked retried on the commit tracker
  kHold,    ///< held, with its ticket, until the store answers (counts in PassSummary::held)
  kReportCollision,  ///< the collision the binding holds on (the first is reported)
};

/// The connector counters a settlement adds to.
enum class Counter {
  kDispatched,    ///< harvest.connector.dispatched{outcome}, PassSummary::acked
  kDeadLettered,  ///< harvest.connector.dead_lettered{reason}, PassSummary::dead_lettered
  kRetried,       ///< harvest.connector.retried{reason}, PassSummary::retried
};

/// `n` added to `counter` under `label`.
struct Count {
  Counter counter = Counter::kRetried;
  Label label = RetryReason::kTransient;
  size_t n = 0;
  bool operator==(const Count&) const = default;
};

/// What settling a batch does. Counts are summed per counter and label, in
/// the order each first appears in the batch.
struct SettlementPlan {
  /// One per message, in batch order.
  std::vector<Step> steps;
  /// Messages (batch indices, in batch order) handed back through one
  /// EventSource::abandon: broker-native poison and fast retries.
  std::vector<size_t> abandon;
  /// Added whatever the broker answers: retries and store holds.
  std::vector<Count> counts;
  /// Added once the acks land (or nothing needed acking): what was settled
  /// and dead-lettered. A message whose ack fails is redelivered and counted
  /// then, so nothing is counted twice...
  std::vector<Count> if_acked;
  /// ...and instead, when the ack fails: every acked message as a retry.
  std::vector<Count> if_ack_failed;
  /// Added once `abandon` succeeded (or was empty): a broker-native hand-back
  /// counts as dead-lettered on the hand-back that reaches the redrive limit
  /// (every one when the limit is unknown), as a retry before.
  std::vector<Count> if_handed_back;
  /// ...and instead, when the hand-back fails: each a retry (the broker hands
  /// it out again after its visibility timeout).
  std::vector<Count> if_hand_back_failed;
  /// Messages the acks vouch for (kAck and kSettle steps).
  size_t acked = 0;
  /// A message met an unreachable store: the store outage begins.
  bool enter_store_outage = false;
  bool operator==(const SettlementPlan&) const = default;
};

/// The plan for a batch: `results[i]` is message i's verdict, `deliveries[i]`
/// what else settlement needs of it (both in batch order, the same length);
/// `redrive_max_receives` is EventSource::redrive_max_receives(). Pure: reads
/// nothing else and keeps nothing.
[[nodiscard]] SettlementPlan plan_settlement(const std::vector<Dispatched>& results,
                                             const std::vector<Delivery>& deliveries,
                                             std::optional<int> redrive_max_receives);

}  // namespace harvest::connector
