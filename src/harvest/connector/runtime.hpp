// The connector runtime: one binding, one source, one loop (CON-5 … CON-14).
//
// A pass (`run_once`) samples lag when due (budgeted, LagSampler; first, so a
// wedged binding keeps reporting what it owes), checks for a stall, receives
// a batch and dispatches it by group commit:
//   1. map: every message is mapped and its dedupe key derived on the
//      dispatch pool, at most `max_in_flight` at once (in broker order with
//      one). Undecodable and rejected messages get their verdict here.
//   2. commit: the mapped messages, in batch order, go to the engine in
//      groups of at most `max_in_flight`, one transaction per group
//      (`engine::internal::ConnectorStarts`, the engine's derived-key path);
//      each message gets the outcome a single start would have had, so one
//      bad message never fails its neighbours.
//   3. settle: acks exactly what harvest now durably owns (for Kafka the
//      contiguous completed prefix per partition), dead-letters poison,
//      leaves everything else unacked for the broker to redeliver, and checks
//      for a stall again. What to do is planned from the verdicts alone
//      (plan_settlement, settlement.hpp), then done.
// `run` repeats passes until stopped, answering a stall with
// `EventSource::recover()` (after which every partition's commit state is
// forgotten: the rebuilt consumer redelivers all of them from their commit).
//
// Store outage. A commit that fails because the store cannot be reached
// (`is_unavailable`) says nothing about the message or the broker, so it
// never counts toward a stall. The runtime instead holds the messages it
// could not commit (positional sources; they stay unacked), stops receiving,
// and probes the store (`Engine::probe_store`) with back-off from
// `store_probe_initial` doubling to `store_probe_max`. Once the store answers
// the held messages are dispatched again in batch order, before anything new
// is received, with the same dedupe keys; then intake resumes. Entering and
// leaving the state is logged once each and published as the
// harvest.connector.store_unavailable gauge. Redelivering sources (SQS) hold
// nothing: their broker hands the messages back after the visibility timeout.
//
// Coordinate collisions. A message whose coordinate key is already held by
// a run (or signal) recorded from a different record (fingerprint.hpp) is
// never acknowledged as a duplicate: the binding's CollisionPolicy decides.
// With kHold the message stays unacknowledged, the binding stops taking new
// messages (lag keeps being sampled; replays keep running) and reports the
// collision until it is restarted — under a new key_incarnation — and every
// collision is counted (harvest.connector.coordinate_collisions) and shown
// in status().
//
// Threads: `run`/`run_once` on the caller's thread (the consumer thread);
// `max_in_flight` mapping threads (DispatchPool); one lag-sampler thread.
// Not reentrant: one consumer thread at a time. Times come from
// `ConnectorRuntimeConfig::clock`.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <harvest/common/clock.hpp>
#include <harvest/connector/binding.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::connector_dlq {
class DeadLetterStore;  // <harvest/connector_dlq/dead_letter_store.hpp>
}  // namespace harvest::connector_dlq

namespace harvest::connector {

// The runtime's parts its accessors expose, internal to the connector module
// (each in its own header under harvest/connector/, not installed).
class CommitTracker;
class StrikeCounter;

/// Tuning of one ConnectorRuntime: polling, batching, stall detection and
/// back-off. None of it weakens delivery: a message is acked only once
/// harvest durably owns it, whatever these are set to.
struct ConnectorRuntimeConfig {
  /// Longest wait for the first message of a batch. Default 1 s (SQS then
  /// long-polls instead of billing a call per round trip).
  std::chrono::milliseconds poll_timeout{1000};
  /// Pause after an idle poll. Default 200 ms.
  std::chrono::milliseconds idle_backoff{200};
  /// Lag is sampled at most this often, and a sample may take at most this
  /// long before it is abandoned. Measured from a sample's completion.
  /// Default 15 s.
  std::chrono::milliseconds lag_sample_interval{15000};
  /// Messages requested per receive. 0 is floored to 1 at receive. Default 64.
  size_t max_batch = 64;
  /// Completed offsets held behind an unsettled head before the partition
  /// counts as stalled. Default max(4 × max_in_flight, 32); 0 disables this
  /// heuristic (a retried head on a positional source is still a stall).
  std::optional<size_t> stall_threshold;
  /// Group commits of one pass in flight at once for a `starts` binding
  /// (which promises no order beyond max_in_flight(1)); signals-with-start and
  /// max_in_flight(1) always commit one group at a time, in batch order.
  /// Default 2; 0 is floored to 1.
  size_t commit_concurrency = 2;
  /// First pause between store probes while the store is unreachable; each
  /// failed probe doubles it up to `store_probe_max`. The store's return is
  /// noticed at most `store_probe_max` later. Defaults 100 ms and 2 s.
  std::chrono::milliseconds store_probe_initial{100};
  std::chrono::milliseconds store_probe_max{2000};  ///< see store_probe_initial
  /// Dead letters marked for replay (connector_dlq) are looked for at most
  /// this often, and at most `replay_batch` of them replayed per look
  /// (0 floored to 1). Only with a replay store (with_replay_store).
  /// Defaults 5 s and 16; an interval of 0 looks on every pass.
  std::chrono::milliseconds replay_poll_interval{5000};
  size_t replay_batch = 16;  ///< see replay_poll_interval
  /// Steady time for lag budgets and back-off pauses; null means the process
  /// clock. Tests pass a ManualClock (MockSource reads the same clock).
  std::shared_ptr<Clock> clock;
};

/// What one pass (`ConnectorRuntime::run_once`) did, in messages.
struct PassSummary {
  size_t received = 0;       ///< messages taken from the broker this pass
  size_t acked = 0;          ///< dispatched (or replayed, or deferred) and acked
  size_t retried = 0;        ///< left unacked for redelivery
  size_t dead_lettered = 0;  ///< recorded as poison (sink row + ack, or handed to the broker)
  size_t held = 0;           ///< of `retried`: kept to dispatch again once the store answers
  /// Held on a coordinate collision (CollisionPolicy::kHold): neither acked
  /// nor retried, and the binding holds. (Dead-lettered collisions count in
  /// `dead_lettered`, re-dispatched ones in `acked`.)
  size_t collisions = 0;
  /// The store could not be reached: intake is paused until a probe succeeds
  /// (`run` waits `store_probe_delay()` before the next pass).
  bool store_unavailable = false;
};

/// What one look at the replay queue did (replay_requested).
struct ReplaySummary {
  size_t claimed = 0;        ///< marked rows taken
  size_t started = 0;        ///< a new execution (or entity signal) from a replay
  size_t existing = 0;       ///< the dedupe key already had its execution
  size_t deferred = 0;       ///< accepted under deferred admission
  size_t dead_lettered = 0;  ///< failed again (recorded with the new reason)
  size_t retried = 0;        ///< transient failure: left marked for the next look
};

/// A binding's live state as its runtime sees it (`ConnectorRuntime::status`):
/// what an operator's overview shows. Counters count messages since the
/// runtime was built.
struct BindingStatus {
  std::string binding;       ///< the binding's name
  std::string kind;          ///< "start" or "signal" (signals with start)
  std::string stream;        ///< the topic or queue consumed
  std::string workflow;      ///< the workflow it starts or signals
  std::string subscription;  ///< EventSource::subscription_identity()
  bool running = false;      ///< a consumer thread is in run()
  /// Messages the broker holds beyond what was consumed, at the last sample;
  /// unset before the first sample or when the source cannot tell.
  std::optional<int64_t> lag;
  size_t in_flight = 0;  ///< held for dispatch once the store answers, after the last pass
  /// When the last pass ended; unset before the first.
  std::optional<std::chrono::system_clock::time_point> last_pass;
  uint64_t stalls = 0;          ///< passes that found a partition stalled
  uint64_t rebuilds = 0;        ///< consumer rebuilds that answered a stall
  bool store_available = true;  ///< false while intake waits for the store
  uint64_t dispatched = 0;      ///< acked after a durable start or signal
  uint64_t dead_lettered = 0;   ///< recorded as poison
  uint64_t retried = 0;         ///< left for redelivery
  uint64_t collisions = 0;      ///< coordinate collisions met (any policy)
  /// Set while the binding holds on a coordinate collision
  /// (CollisionPolicy::kHold): what happened and what to do, ready to show.
  std::optional<std::string> collision_hold;
};

/// Why a pass failed (ConnectorError::kind).
enum class ConnectorErrorKind {
  kStalled,  ///< a partition's commit prefix cannot advance (carries `stall`)
  kSource,   ///< the source failed to receive (carries `source_error`)
};

/// A pass that could not go on: the error of `run_once`. `run` answers a
/// stall by rebuilding the source and a source failure by retrying with back-off.
struct ConnectorError {
  ConnectorErrorKind kind;     ///< stall or source failure
  std::string message;         ///< names the binding (and partition); ready to log
  std::optional<Stall> stall;  ///< the stalled partition; set only for kStalled
  Error source_error;          ///< the receive error; set only for kSource
  PassSummary summary;         ///< what the pass did before failing
};

/// Runs one binding: receives from its source, dispatches to the engine and
/// acks what harvest durably owns (see the file comment). Lifecycle:
/// construct, optionally attach a dead-letter sink and replay store, then
/// `run()` on one consumer thread until stopped; the destructor joins its
/// mapping and lag-sampler threads. Not thread-safe: one consumer thread drives
/// it; the accessors are for that thread (or once it is stopped). Not copyable.
class ConnectorRuntime {
 public:
  /// Keeps `binding`, `source` (shared with whoever else holds it) and a
  /// reference to `engine` (which must outlive the runtime). `mode` resolves
  /// as resolve_idempotency_mode (binding_rules.hpp) says; a binding that
  /// binding_refusals refuses throws ConfigError naming every refusal. The
  /// dead-letter sink starts as UnconfiguredDeadLetterSink: see
  /// with_dead_letter_sink.
  ConnectorRuntime(std::shared_ptr<const SourceBinding> binding,
                   std::shared_ptr<EventSource> source, engine::Engine& engine,
                   std::shared_ptr<metrics::MetricsRecorder> metrics,
                   IdempotencyMode mode = IdempotencyMode::kAuto,
                   ConnectorRuntimeConfig config = {});
  ~ConnectorRuntime();
  ConnectorRuntime(const ConnectorRuntime&) = delete;
  ConnectorRuntime& operator=(const ConnectorRuntime&) = delete;

  /// Where poison messages are recorded before they are acked (shared with
  /// whoever else holds it), replacing UnconfiguredDeadLetterSink. Call before
  /// `run()`. A failed sink write leaves the message unacked, to be retried.
  /// Unused by a binding with broker-native dead letters.
  ConnectorRuntime& with_dead_letter_sink(std::shared_ptr<DeadLetterSink> sink);
  /// Where marked dead letters of this binding are picked up for replay
  /// (shared with whoever else holds it; null: no replay). The plugin wires
  /// the harvest table's store for every binding that dead-letters there.
  ConnectorRuntime& with_replay_store(std::shared_ptr<connector_dlq::DeadLetterStore> store);

  /// Replays up to `replay_batch` dead letters marked for this binding: each
  /// stored payload goes through the binding's mapper and start path under
  /// the row's original dedupe key (so at most one execution ever results),
  /// and the row records the outcome. A row dead-lettered as a
  /// `coordinate_collision` is the exception: it starts under its key in the
  /// binding's current key_incarnation, and is refused (recorded with the
  /// reason) while that is still the incarnation it collided under. A mapping
  /// rejection or a refused start is recorded as dead_lettered with the new
  /// reason, at once (no strikes: the operator asked for this one attempt); a
  /// transient failure leaves the row marked. The mapper sees the stored
  /// payload, record key and headers with the original coordinates (rows
  /// written before the key and headers were kept carry none). Called by run_once
  /// when replay_poll_interval has passed; callable directly (tests,
  /// operators' tools) from the consumer thread.
  [[nodiscard]] Result<ReplaySummary> replay_requested();

  /// One pass (see the file comment). Every pass, whatever its outcome, ends
  /// by publishing harvest.connector.in_flight (what is still held) and
  /// harvest.connector.last_pass_timestamp_seconds (wall time).
  [[nodiscard]] std::expected<PassSummary, ConnectorError> run_once();
  /// Passes until `stop` is requested (returns success) or the binding must
  /// stop: a stall the source cannot recover from (returns the error, logged).
  [[nodiscard]] Status run(std::stop_token stop);

  /// The idempotency mode in force, resolved from the requested one (never kAuto).
  [[nodiscard]] IdempotencyMode idempotency_mode() const;
  /// The stall threshold in force: the config's, or its default when unset.
  [[nodiscard]] size_t stall_threshold() const;
  /// The binding this runtime runs.
  [[nodiscard]] const SourceBinding& binding() const;
  /// Per-partition commit state (positional sources); for tests and diagnostics.
  /// The type is internal (harvest/connector/commit_tracker.hpp).
  [[nodiscard]] const CommitTracker& tracker() const;
  /// Mapping rejections counted per message (CON-9); in memory only.
  /// The type is internal (harvest/connector/strike_counter.hpp).
  [[nodiscard]] const StrikeCounter& strikes() const;
  /// Whether the runtime is waiting for an unreachable store, and how long it
  /// pauses before its next probe.
  [[nodiscard]] bool store_unavailable() const;
  /// The pause before the next store probe (see store_unavailable).
  [[nodiscard]] std::chrono::milliseconds store_probe_delay() const;
  /// Messages held for dispatch once the store answers again.
  [[nodiscard]] size_t held() const;
  /// The collision the binding holds on (CollisionPolicy::kHold), if any:
  /// names the binding, the coordinates, the earlier run and the remedy.
  [[nodiscard]] std::optional<std::string> collision_hold() const;
  /// Consumer rebuilds (`EventSource::recover()` answering a stall) so far.
  [[nodiscard]] uint64_t recoveries() const;
  /// The binding's live state. Thread-safe: any thread (an HTTP handler)
  /// may call it while the consumer thread runs.
  [[nodiscard]] BindingStatus status() const;

 private:
  /// The runtime's state and the steps of a pass (runtime_impl.hpp).
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harvest::connector
