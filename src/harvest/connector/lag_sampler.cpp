#include <harvest/common/log.hpp>
#include <harvest/connector/lag_sampler.hpp>

namespace harvest::connector {

LagSampler::LagSampler(std::string binding, std::shared_ptr<EventSource> source,
                       std::shared_ptr<metrics::MetricsRecorder> metrics,
                       std::chrono::milliseconds interval, std::shared_ptr<Clock> clock)
    : binding_(std::move(binding)),
      source_(std::move(source)),
      metrics_(std::move(metrics)),
      interval_(interval),
      clock_(clock ? std::move(clock) : Clock::steady()),
      thread_([this](std::stop_token st) { loop(st); }) {}

LagSampler::~LagSampler() {
  thread_.request_stop();
  cv_.notify_all();
  thread_ = {};
}

bool LagSampler::due() {
  std::lock_guard lock(mu_);
  return !running_ && !requested_ && clock_->now() >= next_due_;
}

void LagSampler::maybe_sample() {
  std::unique_lock lock(mu_);
  // An abandoned sample still running blocks the next one; the interval
  // counts from its completion.
  if (running_ || requested_ || clock_->now() < next_due_) return;
  requested_ = true;
  const uint64_t epoch = epoch_;
  cv_.notify_all();
  const bool finished =
      clock_->wait_until(lock, cv_, clock_->now() + interval_, {}, [&] { return epoch_ != epoch; });
  // Abandoned either way: the pass stopped waiting, or the sample itself gave
  // up at its deadline (the broker could not answer in time) and finished
  // just as the wait ended.
  if (!finished || abandoned_) {
    log::warn(
        "binding '{}': connector lag sample exceeded its budget of {} ms and was abandoned; "
        "widen lag_sample_interval or reduce what a sample costs",
        binding_, interval_.count());
    return;
  }
  if (value_) {
    metrics_->set_gauge(metrics::kConnectorLag, {{"source", binding_}},
                        static_cast<double>(*value_));
    last_.store(*value_, std::memory_order_relaxed);
  }
}

void LagSampler::loop(std::stop_token st) {
  while (true) {
    std::unique_lock lock(mu_);
    if (!cv_.wait(lock, st, [&] { return requested_; })) return;
    requested_ = false;
    running_ = true;
    const uint64_t epoch = epoch_;
    lock.unlock();
    const auto deadline = clock_->now() + interval_;
    auto r = source_->lag(deadline);
    lock.lock();
    running_ = false;
    next_due_ = clock_->now() + interval_;
    // A sample that finished past its budget was already abandoned by the
    // pass: its value must not reach the gauge.
    const bool in_budget = clock_->now() <= deadline;
    value_ = (r && in_budget) ? *r : std::nullopt;
    // std::nullopt from the source means it could not answer by the deadline.
    abandoned_ = r && !value_;
    if (!r) log::warn("binding '{}': lag sample failed: {}", binding_, r.error().describe());
    epoch_ = epoch + 1;
    cv_.notify_all();
  }
}

}  // namespace harvest::connector
