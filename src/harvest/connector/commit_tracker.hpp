// Per-partition contiguous-prefix commit tracking for positional sources
// (CON-6, CON-7).
//
// A Kafka commit of offset N asserts everything below N is done, but
// messages settle out of order. The tracker commits only the contiguous
// completed prefix of each partition:
// - the first offset seen starts a generation: base = mark = offset;
// - settling advances `mark` (the next offset to commit) over every
//   completed offset that follows it. Only received offsets count: Kafka
//   delivers a partition in order, so offsets it never hands out (compacted
//   records, transaction markers) are gaps the prefix steps over;
// - a delivery in [base, mark) was already settled in this generation (a
//   replay): it is re-acked at the current mark, never below it;
// - a delivery below `base` means the partition was handed back behind the
//   mark (offset reset, rebalance): the old generation is discarded and the
//   prefix rebuilt from the new position; settlements tagged with the old
//   generation are dropped, so a stale higher mark is never committed;
// - so does a delivery under a new *source* assignment generation
//   (`Message::generation`), even inside [base, mark): the partition was
//   handed back (or reset inside the settled range), so the old mark speaks
//   for records the new assignment has not settled;
// - a partition the source no longer owns is forgotten (`forget_unowned`),
//   so a stall on a revoked partition never rebuilds the consumer.
// Stall signals: a retried offset on a source whose abandon does not
// redeliver wedges the partition at once; otherwise `stall_threshold` or more
// completed offsets held behind an unsettled head is a stall.
//
// Not thread-safe: owned and used by the runtime's consumer thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <harvest/connector/coordinates.hpp>

namespace harvest::connector {

struct Ticket {
  PartitionKey partition;
  int64_t offset;
  uint64_t generation;
  bool reack;  // already settled in this generation
};

class CommitTracker {
 public:
  // Registers a delivery; the ticket must be settled or retried.
  // `source_generation`: the source's assignment generation of the delivery.
  [[nodiscard]] Ticket on_receive(const PartitionKey& partition, int64_t offset,
                                  uint64_t source_generation = 0);
  // The message is durably owned. Returns the offset to commit (the new mark)
  // when the prefix advanced or the delivery was a re-ack; nothing when the
  // head is still open or the ticket belongs to a discarded generation.
  [[nodiscard]] std::optional<int64_t> on_settled(const Ticket& t);
  // The message was not settled and will not be acked now.
  void on_retried(const Ticket& t, bool source_redelivers);
  // The first stall found, if any. `threshold` 0 disables the backlog check only.
  [[nodiscard]] std::optional<Stall> find_stall(size_t threshold) const;
  // Forgets a partition.
  void clear(const PartitionKey& partition);
  // Forgets every partition for which `owned(partition, source_generation)`
  // is false; returns how many.
  template <typename Owned>
  size_t forget_unowned(Owned owned) {
    size_t n = 0;
    for (auto it = parts_.begin(); it != parts_.end();) {
      if (owned(it->first, it->second.source_generation)) {
        ++it;
      } else {
        it = parts_.erase(it);
        ++n;
      }
    }
    return n;
  }
  // Forgets every partition: after the source rebuilt itself, every
  // partition is redelivered from its last commit, not only the stalled one.
  void clear();

  // Inspection for tests and metrics.
  [[nodiscard]] std::optional<int64_t> mark(const PartitionKey& partition) const;

 private:
  struct State {
    uint64_t generation = 0;
    uint64_t source_generation = 0;
    int64_t base = 0;
    int64_t mark = 0;
    // Offsets received at or above `mark`, each with its unsettled delivery
    // count (0 = settled, waiting for the head).
    std::map<int64_t, int> pending;
    std::optional<int64_t> wedged_at;
    [[nodiscard]] size_t settled_behind_head() const;
  };
  std::map<PartitionKey, State> parts_;
  uint64_t next_generation_ = 1;
};

}  // namespace harvest::connector
