// Steady time as an injected dependency (RocksDB's SystemClock / its mock):
// code that waits for, times out or paces something asks a `Clock`, so tests
// drive it with a `ManualClock` instead of sleeping.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>

namespace harvest {

/// Steady time and timed waits as an injected dependency (see the file
/// comment). Two implementations: `steady()`, the process's steady clock, and
/// ManualClock, for tests. Components hold a clock by `shared_ptr` (for
/// example ConnectorRuntimeConfig::clock) and share one instance; it lives as
/// long as its last holder, and `steady()`'s instance until the process
/// exits. A clock keeps no reference to its callers' mutexes or condition
/// variables beyond one call. Thread-safe: every method may be called from
/// any thread.
class Clock {
 public:
  /// A point in time on this clock.
  using time_point = std::chrono::steady_clock::time_point;
  /// A span of time on this clock.
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;

  /// The current time on this clock.
  [[nodiscard]] virtual time_point now() const = 0;

  /// With `lock` held on the mutex `cv` is used with: waits until `pred()`
  /// holds, `deadline` (on this clock) passes or `stop` is requested, and
  /// returns `pred()`. Spurious wake-ups are absorbed.
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable_any& cv,
                          time_point deadline, std::stop_token stop,
                          const std::function<bool()>& pred) = 0;

  /// Waits `d` unless stop is requested first. Returns false when stopped.
  bool sleep_for(duration d, std::stop_token stop = {});

  /// The process's steady clock (std::chrono::steady_clock): one shared
  /// instance for the whole process.
  [[nodiscard]] static std::shared_ptr<Clock> steady();
};

/// A clock that moves only when told to: `advance()` wakes every waiter whose
/// deadline it passes. Waiters notice an advance within a millisecond of real
/// time; what they decide depends on manual time alone, so tests built on it
/// do not depend on how loaded the machine is.
///
/// A test constructs one, hands it (by `shared_ptr`) to the code under test,
/// and drives it with `advance()`, using `await_waiters()` to know when that
/// code is parked. It holds only its current time and a count of waiters.
/// Thread-safe: every method may be called from any thread.
class ManualClock final : public Clock {
 public:
  /// Starts one second past the clock's epoch.
  ManualClock() = default;

  /// The manual time: the start plus every `advance()` so far.
  [[nodiscard]] time_point now() const override;
  /// As Clock::wait_until, deciding on manual time; while waiting, re-checks
  /// `pred()`, the deadline and `stop` every millisecond of real time.
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable_any& cv,
                  time_point deadline, std::stop_token stop,
                  const std::function<bool()>& pred) override;

  /// Moves manual time forward by `d`; waiters whose deadline it passes
  /// return within a millisecond of real time.
  void advance(duration d);
  /// Threads currently inside wait_until/sleep_for on this clock.
  [[nodiscard]] int waiters() const { return waiters_.load(); }
  /// Blocks (real time, at most `real_timeout`) until at least `n` threads
  /// wait on this clock: lets a test advance only once the code under test is
  /// parked. Returns whether they did.
  bool await_waiters(int n, std::chrono::milliseconds real_timeout = std::chrono::seconds(10));

 private:
  std::atomic<int64_t> now_ns_{1'000'000'000};  ///< manual time, ns since the epoch
  std::atomic<int> waiters_{0};                 ///< threads inside wait_until
};

}  // namespace harvest
