#include <algorithm>

#include <harvest/common/log.hpp>
#include <harvest/connector/store_outage.hpp>

namespace harvest::connector {

StoreOutage::StoreOutage(std::string binding, std::chrono::milliseconds initial,
                         std::chrono::milliseconds max, std::shared_ptr<Clock> clock,
                         std::shared_ptr<metrics::MetricsRecorder> metrics)
    : binding_(std::move(binding)),
      initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(max),
      clock_(std::move(clock)),
      metrics_(std::move(metrics)) {}

void StoreOutage::enter() {
  delay_ = initial_;
  if (paused_) return;
  paused_ = true;
  since_ = clock_->now();
  log::warn(
      "binding '{}': the store is unreachable; intake paused, {} messages held unacked, probing "
      "every {}..{} ms",
      binding_, held_.size(), delay_.count(), max_.count());
  metrics_->set_gauge(metrics::kConnectorStoreUnavailable, {{"source", binding_}}, 1);
}

bool StoreOutage::probed(bool answered) {
  if (!answered) {
    delay_ = std::min(delay_ * 2, std::max(max_, delay_));
    return false;
  }
  paused_ = false;
  const auto down = std::chrono::duration_cast<std::chrono::milliseconds>(clock_->now() - since_);
  log::info("binding '{}': the store answers again after {} ms; dispatching {} held messages",
            binding_, down.count(), held_.size());
  metrics_->set_gauge(metrics::kConnectorStoreUnavailable, {{"source", binding_}}, 0);
  return true;
}

void StoreOutage::hold(Message message, std::optional<Ticket> ticket) {
  held_.push_back({std::move(message), std::move(ticket)});
}

std::vector<StoreOutage::Held> StoreOutage::take_held() {
  std::vector<Held> out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace harvest::connector
