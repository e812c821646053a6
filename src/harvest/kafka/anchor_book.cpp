#include <algorithm>

#include <harvest/kafka/anchor_book.hpp>

namespace harvest::kafka {

bool AnchorBook::record_first_read(int32_t partition, int64_t offset) {
  return anchors_.try_emplace(partition, offset).second;
}

void AnchorBook::raise(int32_t partition, int64_t next_offset) {
  auto [it, inserted] = anchors_.try_emplace(partition, next_offset);
  if (!inserted) it->second = std::max(it->second, next_offset);
}

std::optional<int64_t> AnchorBook::anchor(int32_t partition) const {
  auto it = anchors_.find(partition);
  if (it == anchors_.end()) return std::nullopt;
  return it->second;
}

std::map<int32_t, int64_t> select_anchor_commits(
    const std::map<int32_t, int64_t>& anchors, const std::set<int32_t>& owned,
    const std::map<int32_t, int64_t>& group_committed) {
  std::map<int32_t, int64_t> out;
  for (const auto& [partition, anchor] : anchors) {
    if (!owned.contains(partition)) continue;
    auto committed = group_committed.find(partition);
    if (committed != group_committed.end() && anchor <= committed->second) continue;
    out.emplace(partition, anchor);
  }
  return out;
}

}  // namespace harvest::kafka
