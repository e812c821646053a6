#include <thread>

#include <harvest/common/clock.hpp>

namespace harvest {

namespace {

class SteadyClock final : public Clock {
 public:
  [[nodiscard]] time_point now() const override { return std::chrono::steady_clock::now(); }

  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable_any& cv,
                  time_point deadline, std::stop_token stop,
                  const std::function<bool()>& pred) override {
    return cv.wait_until(lock, stop, deadline, pred);
  }
};

}  // namespace

bool Clock::sleep_for(duration d, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  wait_until(lock, cv, now() + d, stop, [] { return false; });
  return !stop.stop_requested();
}

std::shared_ptr<Clock> Clock::steady() {
  static const std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>();
  return clock;
}

Clock::time_point ManualClock::now() const {
  return time_point(std::chrono::nanoseconds(now_ns_.load()));
}

bool ManualClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable_any& cv,
                             time_point deadline, std::stop_token stop,
                             const std::function<bool()>& pred) {
  ++waiters_;
  // Real time only paces how soon an advance is noticed; the decision to
  // stop waiting reads manual time.
  while (!pred() && now() < deadline && !stop.stop_requested()) {
    (void)cv.wait_for(lock, stop, std::chrono::milliseconds(1), pred);
  }
  --waiters_;
  return pred();
}

void ManualClock::advance(duration d) {
  now_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

bool ManualClock::await_waiters(int n, std::chrono::milliseconds real_timeout) {
  const auto until = std::chrono::steady_clock::now() + real_timeout;
  while (waiters_.load() < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace harvest
