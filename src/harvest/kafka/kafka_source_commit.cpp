// KafkaSource: committing acknowledged offsets (the contiguous prefix per
// partition, anchors for partitions that saw only poison or EOF).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>

#include <harvest/common/deadline_mutex.hpp>
#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/kafka/anchor_book.hpp>
#include <harvest/kafka/broker_calls.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

void KafkaSource::commit_pending_floors() {
  std::set<int32_t> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [p, anchor] : anchors_->all()) {
      if (owned_.contains(p) && !floors_committed_.contains(p)) pending.insert(p);
    }
  }
  if (pending.empty()) return;
  Result<std::set<int32_t>> settled = [&]() -> Result<std::set<int32_t>> {
    try {  // tests fail this commit to reach the retry path
      HARVEST_FAULT_POINT("kafka.floor_commit");
    } catch (const fault::InjectedCrash& e) {
      return fail(Error::transient_error(e.what()));
    }
    return commit_anchors(pending);
  }();
  if (!settled) {
    log::warn(
        "{}: eager commit of the latest floor for partitions {} failed ({}); "
        "retrying on the next receive",
        log_name_, pending, settled.error().describe());
    return;
  }
  std::lock_guard lock(mu_);
  floors_committed_.insert(settled->begin(), settled->end());
}

Result<std::set<int32_t>> KafkaSource::commit_anchors(const std::set<int32_t>& partitions) {
  std::map<int32_t, int64_t> anchors;
  std::map<int32_t, uint64_t> generations;
  {
    std::lock_guard lock(mu_);
    for (int32_t p : partitions) {
      auto owned = owned_.find(p);
      auto anchor = anchors_->anchor(p);
      if (owned == owned_.end() || !anchor) continue;
      anchors[p] = *anchor;
      generations[p] = owned->second.generation;
    }
  }
  std::set<int32_t> settled;
  if (anchors.empty()) return settled;  // nothing owned: speak for nothing

  auto& consumer = session_consumer();
  std::vector<int32_t> ids;
  std::set<int32_t> owned;
  for (const auto& [p, anchor] : anchors) {
    ids.push_back(p);
    owned.insert(p);
  }
  auto committed =
      detail::committed_offsets(consumer, config_.topic(), ids, config_.sync_timeout());
  if (!committed) return fail(committed.error().error());
  auto to_commit = select_anchor_commits(anchors, owned, *committed);
  for (int32_t p : ids) {
    if (!to_commit.contains(p)) settled.insert(p);  // the group is already at or past it
  }
  if (to_commit.empty()) return settled;

  std::lock_guard commit_lock(commit_mu_);
  {
    // Re-check under commit_mu_: a revocation since the snapshot means the
    // partition is no longer ours to speak for.
    std::lock_guard lock(mu_);
    std::erase_if(to_commit, [&](const auto& entry) {
      auto it = owned_.find(entry.first);
      return it == owned_.end() || it->second.generation != generations[entry.first];
    });
  }
  if (to_commit.empty()) return settled;
  if (auto r = detail::commit_offsets(consumer, config_.topic(), to_commit, config_.sync_timeout());
      !r) {
    return fail(r.error().error());
  }
  log::info("{}: committed anchors {}", log_name_, to_commit);
  for (const auto& [p, offset] : to_commit) settled.insert(p);
  return settled;
}

Status KafkaSource::ack(const std::vector<connector::Message>& messages) {
  for (const auto& m : messages) {
    const auto* c = std::get_if<connector::KafkaCoordinates>(&m.coordinates);
    if (c == nullptr || c->topic != config_.topic()) {
      return fail(Error::bad_request(fmt::format("{}: ack of a message that is not from topic '{}'",
                                                 log_name_, config_.topic())));
    }
  }
  std::map<int32_t, int64_t> next_offsets;
  std::vector<std::string> dropped;
  std::lock_guard commit_lock(commit_mu_);
  {
    std::lock_guard lock(mu_);
    for (const auto& m : messages) {
      const auto& c = std::get<connector::KafkaCoordinates>(m.coordinates);
      auto owned = owned_.find(c.partition);
      if (owned == owned_.end() || owned->second.generation != m.generation) {
        dropped.push_back(fmt::format("{}@{}", c.partition, c.offset));
        continue;
      }
      auto [it, inserted] = next_offsets.try_emplace(c.partition, c.offset + 1);
      if (!inserted) it->second = std::max(it->second, c.offset + 1);
    }
    for (const auto& [p, next] : next_offsets) {
      owned_[p].acked_next = next;
      anchors_->raise(p, next);
    }
  }
  if (!dropped.empty()) {
    log::info(
        "{}: dropped acks for {} (partition revoked or reassigned since the "
        "message was read; its next owner redelivers it)",
        log_name_, dropped);
  }
  if (next_offsets.empty() || !session_) return {};
  detail::TopicPartitions offsets(config_.topic(), next_offsets);
  if (const auto code = session_consumer().commitAsync(offsets.get());
      code != RdKafka::ERR_NO_ERROR) {
    return fail(detail::to_error(code, log_name_ + ": offset commit"));
  }
  return {};
}

}  // namespace harvest::kafka
