// The store-outage hold of one binding (CON-15): beside CommitTracker and
// LagSampler, the third piece of state a connector pass consults. While the
// store cannot be reached, intake pauses; positional messages whose commit
// failed are held, in batch order with their tickets, to be dispatched first
// once the store answers; the store is probed with a back-off from `initial`
// doubling to `max`. It logs the outage once, its end once, and keeps the
// harvest.connector.store_unavailable gauge.
//
// Not thread-safe: owned and used by the runtime's consumer thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <harvest/common/clock.hpp>
#include <harvest/connector/commit_tracker.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::connector {

class StoreOutage {
 public:
  struct Held {
    Message message;
    std::optional<Ticket> ticket;
  };

  StoreOutage(std::string binding, std::chrono::milliseconds initial, std::chrono::milliseconds max,
              std::shared_ptr<Clock> clock, std::shared_ptr<metrics::MetricsRecorder> metrics);

  // A commit failed because the store is unreachable: intake pauses (logged
  // once per outage) and the probe delay starts over from `initial`.
  void enter();
  // Whether intake is paused for an outage.
  [[nodiscard]] bool paused() const { return paused_; }
  // A probe's answer: false doubles the delay (up to `max`); true ends the
  // outage and logs how long it lasted. Returns `answered`.
  bool probed(bool answered);
  [[nodiscard]] std::chrono::milliseconds probe_delay() const { return delay_; }

  // Messages kept for dispatch once the store answers, in order.
  void hold(Message message, std::optional<Ticket> ticket);
  [[nodiscard]] std::vector<Held> take_held();
  void drop_held() { held_.clear(); }
  [[nodiscard]] size_t held() const { return held_.size(); }
  // Paused, or holding messages: the pass neither replays nor stalls.
  [[nodiscard]] bool holding() const { return paused_ || !held_.empty(); }

 private:
  const std::string binding_;
  const std::chrono::milliseconds initial_;
  const std::chrono::milliseconds max_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<metrics::MetricsRecorder> metrics_;
  bool paused_ = false;
  std::chrono::milliseconds delay_{0};
  Clock::time_point since_{};
  std::vector<Held> held_;
};

}  // namespace harvest::connector
