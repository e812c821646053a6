// KafkaSource: partition ownership. Each assignment of a partition gets a
// fresh generation; revocation commits the acked prefix first; `owns` answers
// for the runtime's commit tracker.
#include <librdkafka/rdkafkacpp.h>

#include <harvest/common/log.hpp>
#include <harvest/kafka/broker_calls.hpp>
#include <harvest/kafka/kafka_source.hpp>

namespace harvest::kafka {

void KafkaSource::on_assigned(const std::vector<int32_t>& partitions) {
  std::lock_guard lock(mu_);
  for (int32_t p : partitions) owned_[p] = Ownership{.generation = ++next_generation_};
  // Read-ahead from an earlier generation of these partitions is refetched
  // from the committed offset under the new one.
  drop_buffered(partitions);
}

void KafkaSource::on_revoked(RdKafka::KafkaConsumer& consumer,
                             const std::vector<int32_t>& partitions, bool lost) {
  std::lock_guard commit_lock(commit_mu_);
  std::map<int32_t, int64_t> final_prefix;
  {
    std::lock_guard lock(mu_);
    for (int32_t p : partitions) {
      auto it = owned_.find(p);
      if (it != owned_.end() && it->second.acked_next) final_prefix[p] = *it->second.acked_next;
    }
  }
  // The acked prefix may still be travelling as an async commit; make it
  // durable before the partitions are handed to their next owner. A lost
  // assignment (session expired) is already someone else's: its commit
  // would be refused, and must not be attempted.
  if (!lost && !final_prefix.empty()) {
    if (auto r =
            detail::commit_offsets(consumer, config_.topic(), final_prefix, config_.sync_timeout());
        !r) {
      log::warn("{}: final commit of revoked partitions failed: {}", log_name_,
                r.error().error().describe());
    }
  }
  std::lock_guard lock(mu_);
  for (int32_t p : partitions) owned_.erase(p);
  drop_buffered(partitions);
}

bool KafkaSource::owns(const std::string& topic, int32_t partition, uint64_t generation) const {
  if (topic != config_.topic()) return false;
  std::lock_guard lock(mu_);
  auto it = owned_.find(partition);
  return it != owned_.end() && it->second.generation == generation;
}

}  // namespace harvest::kafka
