#include <gtest/gtest.h>

#include <thread>

#include <harvest/common/clock.hpp>

namespace harvest {
namespace {

using std::chrono::seconds;

TEST(ManualClock, a_wait_ends_only_when_manual_time_passes_its_deadline) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable_any cv;
  std::atomic<bool> done{false};
  std::jthread waiter([&] {
    std::unique_lock lock(mu);
    clock.wait_until(lock, cv, clock.now() + seconds(30), {}, [] { return false; });
    done = true;
  });
  ASSERT_TRUE(clock.await_waiters(1));
  clock.advance(seconds(29));
  // However long real time runs, 29 manual seconds are not 30.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(done.load());
  clock.advance(seconds(1));
  waiter.join();
  EXPECT_TRUE(done.load());
}

TEST(ManualClock, a_predicate_ends_the_wait_before_the_deadline) {
  ManualClock clock;
  std::mutex mu;
  std::condition_variable_any cv;
  bool ready = false;
  std::jthread waiter([&] {
    std::unique_lock lock(mu);
    EXPECT_TRUE(clock.wait_until(lock, cv, clock.now() + seconds(30), {}, [&] { return ready; }));
  });
  ASSERT_TRUE(clock.await_waiters(1));
  {
    std::lock_guard lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
}

TEST(ManualClock, stop_ends_a_sleep) {
  ManualClock clock;
  std::stop_source stop;
  std::jthread sleeper([&] { EXPECT_FALSE(clock.sleep_for(seconds(60), stop.get_token())); });
  ASSERT_TRUE(clock.await_waiters(1));
  stop.request_stop();
  sleeper.join();
}

}  // namespace
}  // namespace harvest
