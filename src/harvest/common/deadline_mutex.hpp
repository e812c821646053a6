// A mutex whose lock can give up at a deadline: what std::timed_mutex offers,
// built on std::mutex and std::condition_variable. libstdc++ implements
// timed_mutex's timed lock with pthread_mutex_clocklock, which GCC 12's
// ThreadSanitizer does not intercept, so the race detector would see unlocks
// of a mutex it never saw locked (and miss the ordering the lock gives).
// Meets the TimedLockable requirements: std::lock_guard and
// std::unique_lock(mutex, deadline) work with it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace harvest {

class DeadlineMutex {
 public:
  void lock() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !held_; });
    held_ = true;
  }
  bool try_lock() {
    std::lock_guard lock(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return !held_; })) return false;
    held_ = true;
    return true;
  }
  template <typename Rep, typename Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_until(std::chrono::steady_clock::now() + timeout);
  }
  void unlock() {
    // Notified under the lock: once it is released the next owner may lock,
    // unlock and destroy this mutex, which std::timed_mutex allows.
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
};

}  // namespace harvest
