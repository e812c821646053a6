// The overview's last hour, for its charts (GET {prefix}/overview/history):
// runs started, completed and failed per minute, counted from the
// executions table, and each binding's lag, sampled in this process. No
// extra service and no extra table: a minute that has passed is counted
// once and kept here, so a refresh counts the last two minutes only, on a
// background thread (OverviewCache) at most every 5 s while a console asks.
// The lag samples start when the process does. Internal to harvest_api.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <harvest/api/http_server.hpp>
#include <harvest/api/overview_cache.hpp>
#include <harvest/engine/engine.hpp>

namespace harvest::api {

class ConsoleHistory {
 public:
  static constexpr long long kMinutes = 60;   // the span shown
  static constexpr size_t kMaxBindings = 64;  // lag series kept

  // Keeps references to `engine`; samples `bindings` (may be unset: no lag
  // series) every `sample_every` on a thread of its own.
  ConsoleHistory(engine::Engine& engine, std::function<std::vector<BindingOverview>()> bindings,
                 std::chrono::milliseconds sample_every);
  ~ConsoleHistory();
  ConsoleHistory(const ConsoleHistory&) = delete;
  ConsoleHistory& operator=(const ConsoleHistory&) = delete;

  // The answer's body: {as_of, minutes: [{at, started, completed, failed}],
  // lag: [{binding, points: [{at, lag}]}]}, oldest first.
  [[nodiscard]] Result<std::string> body();

 private:
  struct LagPoint {
    std::chrono::system_clock::time_point at;
    std::optional<int64_t> lag;
  };
  [[nodiscard]] Result<std::string> count();
  void sample_loop();

  engine::Engine& engine_;
  std::function<std::vector<BindingOverview>()> bindings_;
  std::chrono::milliseconds sample_every_;
  std::map<long long, engine::MinuteActivity> minutes_;  // only count() touches it
  std::mutex mu_;                                        // guards the three below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, std::deque<LagPoint>> lag_;
  std::thread sampler_;
  OverviewCache cache_;  // last: stopped first
};

}  // namespace harvest::api
