#include <fmt/format.h>

#include <algorithm>

#include <harvest/connector/commit_tracker.hpp>

namespace harvest::connector {

size_t CommitTracker::State::settled_behind_head() const {
  return static_cast<size_t>(
      std::count_if(pending.begin(), pending.end(), [](const auto& p) { return p.second == 0; }));
}

Ticket CommitTracker::on_receive(const PartitionKey& partition, int64_t offset,
                                 uint64_t source_generation) {
  auto [it, fresh] = parts_.try_emplace(partition);
  State& s = it->second;
  if (fresh || offset < s.base || source_generation != s.source_generation) {
    // A new partition, one handed back behind everything this generation
    // has seen, or one the source assigned anew: start over from here.
    s = State{};
    s.generation = next_generation_++;
    s.source_generation = source_generation;
    s.base = s.mark = offset;
  } else if (offset < s.mark) {
    return Ticket{partition, offset, s.generation, true};
  }
  ++s.pending[offset];
  return Ticket{partition, offset, s.generation, false};
}

std::optional<int64_t> CommitTracker::on_settled(const Ticket& t) {
  auto it = parts_.find(t.partition);
  if (it == parts_.end() || it->second.generation != t.generation) return std::nullopt;
  State& s = it->second;
  if (t.reack || t.offset < s.mark) return s.mark;  // already inside the committed prefix
  auto p = s.pending.find(t.offset);
  if (p == s.pending.end()) return std::nullopt;
  // One settled delivery is enough: the message is durably owned.
  p->second = 0;
  if (s.wedged_at == t.offset) s.wedged_at.reset();
  bool advanced = false;
  while (!s.pending.empty() && s.pending.begin()->second == 0) {
    s.mark = s.pending.begin()->first + 1;
    s.pending.erase(s.pending.begin());
    advanced = true;
  }
  if (!advanced) return std::nullopt;
  return s.mark;
}

void CommitTracker::on_retried(const Ticket& t, bool source_redelivers) {
  auto it = parts_.find(t.partition);
  if (it == parts_.end() || it->second.generation != t.generation || t.reack) return;
  State& s = it->second;
  auto p = s.pending.find(t.offset);
  if (p == s.pending.end() || p->second == 0) return;  // another delivery settled it
  // Nothing will hand this offset back on a positional source: the prefix is
  // wedged at it until the consumer is rebuilt.
  if (!source_redelivers && (!s.wedged_at || t.offset < *s.wedged_at)) s.wedged_at = t.offset;
}

std::optional<Stall> CommitTracker::find_stall(size_t threshold) const {
  for (const auto& [key, s] : parts_) {
    size_t depth = s.settled_behind_head();
    if (s.wedged_at) return Stall{key, depth, 0, true, *s.wedged_at};
    if (threshold > 0 && depth >= threshold) {
      return Stall{key, depth, threshold, false, s.pending.begin()->first};
    }
  }
  return std::nullopt;
}

void CommitTracker::clear(const PartitionKey& partition) {
  parts_.erase(partition);
}

void CommitTracker::clear() {
  parts_.clear();
}

std::optional<int64_t> CommitTracker::mark(const PartitionKey& partition) const {
  auto it = parts_.find(partition);
  if (it == parts_.end()) return std::nullopt;
  return it->second.mark;
}

}  // namespace harvest::connector
