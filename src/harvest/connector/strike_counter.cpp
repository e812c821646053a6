#include <harvest/common/log.hpp>
#include <harvest/connector/strike_counter.hpp>

namespace harvest::connector {

uint32_t StrikeCounter::strike(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return ++it->second.count;
  }
  if (entries_.size() >= capacity_ && !lru_.empty()) {
    if (!warned_) {
      warned_ = true;
      log::warn(
          "connector binding '{}': the poison strike counter is full ({} messages) and evicted a "
          "live strike count; a poison working set this large never reaches a threshold above 1. "
          "Use poison_threshold(1) or an SQS redrive policy",
          binding_, capacity_);
    }
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{1, lru_.begin()});
  return 1;
}

void StrikeCounter::reset(const std::string& key) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    lru_.erase(it->second.pos);
    entries_.erase(it);
  }
}

uint32_t StrikeCounter::count(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.count;
}

size_t StrikeCounter::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

bool StrikeCounter::eviction_warned() const {
  std::lock_guard lock(mu_);
  return warned_;
}

}  // namespace harvest::connector
