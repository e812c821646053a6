// Consecutive mapping rejections per message (CON-9).
//
// In memory and bounded: at most `capacity` messages per binding (default
// 10,000). When full, the least recently struck entry is evicted; the first
// eviction of a live count logs a warning, because a poison working set
// larger than the cap never reaches a threshold above 1. A restart resets
// every count. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace harvest::connector {

class StrikeCounter {
 public:
  static constexpr size_t kDefaultCapacity = 10'000;
  StrikeCounter(std::string binding, size_t capacity = kDefaultCapacity)
      : binding_(std::move(binding)), capacity_(capacity) {}

  // Records one more rejection of `key`; returns the count including it.
  uint32_t strike(const std::string& key);
  // The message settled or was dead-lettered: forget it.
  void reset(const std::string& key);
  [[nodiscard]] uint32_t count(const std::string& key) const;
  [[nodiscard]] size_t size() const;
  [[nodiscard]] bool eviction_warned() const;

 private:
  std::string binding_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // front = most recent
  struct Entry {
    uint32_t count;
    std::list<std::string>::iterator pos;
  };
  std::unordered_map<std::string, Entry> entries_;
  bool warned_ = false;
};

}  // namespace harvest::connector
