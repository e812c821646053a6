// Latest anchoring (KAF-4) as plain data, free of librdkafka so its rules are
// unit-tested on their own.
//
// The first offset this process reads from a partition is where the group's
// reset policy resolved; under `latest` that is a moving target, so it is
// pinned here, raised by every commit, committed before a rebuild (and
// eagerly under `latest`) and used as the lag baseline. An anchor is a local
// fact; `select_anchor_commits` decides which of them this consumer may
// state to the whole group.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace harvest::kafka {

// Not thread-safe: KafkaSource guards it with its state mutex.
class AnchorBook {
 public:
  // Records `offset` as the partition's anchor unless one exists (first read
  // wins; an anchor never moves backwards). Returns true if it was recorded.
  bool record_first_read(int32_t partition, int64_t offset);
  // A commit of `next_offset` (last acked offset + 1) raises the anchor to it.
  void raise(int32_t partition, int64_t next_offset);
  [[nodiscard]] std::optional<int64_t> anchor(int32_t partition) const;
  [[nodiscard]] const std::map<int32_t, int64_t>& all() const { return anchors_; }

 private:
  std::map<int32_t, int64_t> anchors_;
};

// The anchors this consumer may commit: only partitions it still `owned`s
// (nothing at all while the assignment is empty), and only where the anchor
// strictly raises the group's committed offset (`group_committed` omits
// partitions without a commit). Ownership alone is not enough: an anchor is
// stale across a revoke-and-return (read at 100, moved elsewhere and advanced
// to 5000, handed back), and writing it would rewind the group.
[[nodiscard]] std::map<int32_t, int64_t> select_anchor_commits(
    const std::map<int32_t, int64_t>& anchors, const std::set<int32_t>& owned,
    const std::map<int32_t, int64_t>& group_committed);

}  // namespace harvest::kafka
