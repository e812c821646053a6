// The overview's answer, shared by every console and kept fresh off the
// request path. Counting runs by workflow and status reads the whole
// executions table (about 200 ms at a million runs), so a request never
// waits for it once an answer exists: it gets the newest answer (its
// `as_of` says when it was counted) and, when that is older than the
// time to live, a background thread counts again. Only the first request
// for a window counts while it waits. Internal to harvest_api.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <harvest/common/error.hpp>

namespace harvest::api {

class OverviewCache {
 public:
  // `count(window)` produces the answer's body for a window in seconds;
  // it runs on the caller's thread the first time, on the cache's own
  // thread after that, and never twice at once.
  using Count = std::function<Result<std::string>(long long window)>;

  OverviewCache(Count count, std::chrono::milliseconds ttl);
  ~OverviewCache();  // stops and joins the refresher
  OverviewCache(const OverviewCache&) = delete;
  OverviewCache& operator=(const OverviewCache&) = delete;

  // The answer for `window`. A failed background count drops the window's
  // answer, so the next request counts again and reports the error.
  [[nodiscard]] Result<std::string> get(long long window);

  // At most this many windows are kept (the console asks for one); the
  // least recently counted goes first.
  static constexpr size_t kMaxWindows = 8;

 private:
  struct Answer {
    std::chrono::steady_clock::time_point at;
    std::string body;
    bool refreshing = false;
  };
  void refresh_loop();
  void keep(long long window, std::string body);

  Count count_;
  std::chrono::milliseconds ttl_;
  std::mutex counting_;  // one count at a time
  std::mutex mu_;        // guards everything below
  std::condition_variable wake_;
  std::map<long long, Answer> answers_;
  std::deque<long long> due_;
  bool stopping_ = false;
  std::thread refresher_;
};

}  // namespace harvest::api
