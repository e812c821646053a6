// ConnectorRuntime::Impl: the runtime's state and the steps of a pass,
// behind the installed runtime.hpp, whose ConnectorRuntime forwards every call
// here (so that header carries no state and no internal type). Internal to
// the connector module; its definitions are split by phase:
//   runtime.cpp         construction, map, dispatch and settle;
//   runtime_commit.cpp  the commit phase and coordinate collisions;
//   runtime_replay.cpp  replay of dead letters an operator marked;
//   runtime_run.cpp     the loop, stall recovery and the drain at stop.
// Threads and lifecycle are ConnectorRuntime's (runtime.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/clock.hpp>
#include <harvest/common/trace_context.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/connector/settlement.hpp>

namespace harvest::connector {

// Only named here; the .cpp files that use them include their headers.
class DispatchPool;  // dispatch_pool.hpp
class LagSampler;    // lag_sampler.hpp
class StoreOutage;   // store_outage.hpp
struct Ticket;       // commit_tracker.hpp

struct ConnectorRuntime::Impl {
  /// As ConnectorRuntime's constructor (and throws as it does).
  Impl(std::shared_ptr<const SourceBinding> binding, std::shared_ptr<EventSource> source,
       engine::Engine& engine, std::shared_ptr<metrics::MetricsRecorder> metrics,
       IdempotencyMode mode, ConnectorRuntimeConfig config);
  /// Joins the lag-sampler thread, then the mapping threads.
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // ConnectorRuntime's calls of the same names (see runtime.hpp).
  Result<ReplaySummary> replay_requested();
  std::expected<PassSummary, ConnectorError> run_once();
  Status run(std::stop_token stop);
  std::optional<std::string> collision_hold() const;
  BindingStatus status() const;

  /// One message between the map and the commit phase.
  struct Mapped {
    std::optional<Dispatched> verdict;  ///< decided by mapping (poison, rejected)
    std::optional<DedupeKey> key;       ///< the dedupe key (CON-8)
    /// The record's fingerprint (fingerprint.hpp), stored with a coordinate key.
    std::optional<int64_t> fingerprint;
    MappedMessage message;
    std::string ref;                    ///< rendered coordinates, the start's source_ref
    std::optional<TraceContext> trace;  ///< the producer's, from the message's headers
    Clock::time_point started{};
  };
  /// The engine's answer for one message.
  struct Committed {
    /// What the start became; unused when `withheld`.
    DispatchOutcome outcome = DispatchOutcome::kDispatched;
    std::optional<std::string> execution_id;
    /// The key is held by `execution_id`, recorded from another record.
    bool collision = false;
    /// Not committed: another message of the group collided (kHold).
    bool withheld = false;
  };

  std::expected<PassSummary, ConnectorError> run_pass();
  MappingOutcome apply_mapper(const Message& m) const;
  Mapped map_one(const Message& m);
  void maybe_replay();
  void commit_group(const std::vector<Message>& messages, std::vector<Mapped>& mapped,
                    const std::vector<size_t>& group, std::vector<Dispatched>& results);
  std::vector<Result<Committed>> commit_to_engine(std::vector<Mapped*>& group);
  /// CollisionPolicy::kHold: commits `group` so that nothing at or past a
  /// colliding message of a partition is started — a group in which a
  /// message collides commits nothing, and is committed again without the
  /// collisions and what follows them on their partitions (held_from_).
  /// Indices in the answer are positions in `group`; an unset entry is held.
  std::vector<std::optional<Result<Committed>>> commit_holding(const std::vector<Message>& messages,
                                                               std::vector<Mapped>& mapped,
                                                               const std::vector<size_t>& group);
  /// Whether `m` sits at or past a collision this runtime holds on.
  bool behind_held_collision(const Message& m);
  /// settle()'s kCollisionHold: counts the collision and, for the first one,
  /// records the report the binding holds on (log, status, gauge).
  void hold_on_collision(const Dispatched& d, PassSummary& summary);
  Dispatched settle_outcome(const Message& m, const Mapped& mapped,
                            const Result<Committed>& outcome);
  Dispatched poison(const Message& m, const std::string& key, DeadLetterReason reason,
                    const std::string& detail, int attempts);
  /// A coordinate collision met by `m`, whose key `execution_id` holds: what
  /// the binding's CollisionPolicy makes of it (kDispatch is handled in
  /// commit_group, which starts it again under a fingerprinted key).
  Dispatched collided(const Message& m, const Mapped& mapped, const Committed& earlier);
  /// CollisionPolicy::kDispatch: every message of `group` whose outcome is a
  /// collision is mapped again and started under a key derived from its
  /// fingerprint; its outcome is replaced by that start's.
  void redispatch_collided(const std::vector<Message>& messages, std::vector<Mapped>& mapped,
                           const std::vector<size_t>& group,
                           std::vector<Result<Committed>>& outcomes);
  void dispatch(const std::vector<Message>& messages,
                const std::vector<std::optional<Ticket>>& tickets, PassSummary& summary);
  /// Tickets `messages` (positional sources) and dispatches them.
  void dispatch_received(const std::vector<Message>& messages, PassSummary& summary);
  /// Custody (SQS-5): what the source received ahead is dispatched, or, with
  /// the store down, released (abandon) — never left invisible across a
  /// pause, a lag sample or a stop.
  void dispatch_received_ahead(PassSummary& summary);
  void release_received_ahead(std::string_view why);
  /// Applies plan_settlement's plan for the batch (settlement.hpp): acks,
  /// hand-backs, counters, holds and the store outage.
  void settle(const std::vector<Message>& messages,
              const std::vector<std::optional<Ticket>>& tickets,
              const std::vector<Dispatched>& results, PassSummary& summary);
  /// Store outage (see the file comment and StoreOutage).
  void enter_store_unavailable();
  [[nodiscard]] bool store_answers();
  /// Drops the commit state of partitions the source no longer owns.
  void forget_revoked();
  std::expected<PassSummary, ConnectorError> stalled(const Stall& s,
                                                     const PassSummary& summary) const;

  std::shared_ptr<const SourceBinding> binding_;
  std::shared_ptr<EventSource> source_;
  engine::Engine& engine_;
  std::shared_ptr<metrics::MetricsRecorder> metrics_;
  IdempotencyMode mode_;
  ConnectorRuntimeConfig config_;
  size_t stall_threshold_;
  std::shared_ptr<DeadLetterSink> sink_;
  std::shared_ptr<connector_dlq::DeadLetterStore> replays_;
  std::optional<Clock::time_point> last_replay_look_;
  std::unique_ptr<CommitTracker> tracker_;
  std::unique_ptr<StrikeCounter> strikes_;
  std::unique_ptr<DispatchPool> pool_;
  std::unique_ptr<DispatchPool> commit_pool_;
  std::unique_ptr<LagSampler> lag_;
  std::unique_ptr<StoreOutage> outage_;
  /// What status() reads from other threads; written by the consumer thread.
  struct Live {
    std::atomic<bool> running{false};
    std::atomic<bool> store_down{false};
    std::atomic<size_t> in_flight{0};
    std::atomic<int64_t> last_pass_ms{-1};  ///< Unix ms; -1 before the first pass
    std::atomic<uint64_t> stalls{0};
    std::atomic<uint64_t> rebuilds{0};
    std::atomic<uint64_t> dispatched{0};
    std::atomic<uint64_t> dead_lettered{0};
    std::atomic<uint64_t> retried{0};
    std::atomic<uint64_t> collisions{0};
    mutable std::mutex hold_mu;
    std::optional<std::string> collision_hold;  ///< guarded by hold_mu
  };
  std::unique_ptr<Live> live_;
  std::string subscription_;
  /// Rebuild back-off on the runtime's own evidence (CON-18), per partition:
  /// the committed position of each partition (the offset after the last
  /// acked prefix head), and, for a partition whose stall rebuilt the source,
  /// that position then and the pause before its next rebuild. A stall on a
  /// partition whose position has not moved since its last rebuild waits that
  /// pause first (doubling up to 30 s); replays acknowledged in between, or
  /// commits on other partitions, are no evidence for it.
  struct Rebuilt {
    std::optional<int64_t> committed;
    std::chrono::milliseconds backoff;
  };
  std::map<PartitionKey, int64_t> committed_;
  /// kHold: per partition, the lowest offset met a collision at; nothing at
  /// or past it is started by this runtime. Written by the commit lanes.
  std::mutex held_mu_;
  std::map<PartitionKey, int64_t> held_from_;
  std::map<PartitionKey, Rebuilt> rebuilt_;
  /// Messages in a group commit at once; groups are sized so that lanes ×
  /// group size ≤ max_in_flight (CON-19).
  size_t commit_lanes_ = 1;
};

}  // namespace harvest::connector
