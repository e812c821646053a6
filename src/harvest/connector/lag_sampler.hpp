// Budgeted lag sampling for one binding (CON-13). `maybe_sample` (the
// consumer thread, once per pass) asks the sampler thread for a sample when
// one is due and waits at most one interval for it; a sample that overruns
// is abandoned — logged, its value never reaches the gauge — as is one the
// source itself gave up at its deadline; the next one
// is due a full interval after the abandoned one completes. All times come
// from the injected `Clock`.
//
// Threads: `maybe_sample` from one thread at a time; `EventSource::lag` runs
// on the sampler's own thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <harvest/common/clock.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::connector {

class LagSampler {
 public:
  LagSampler(std::string binding, std::shared_ptr<EventSource> source,
             std::shared_ptr<metrics::MetricsRecorder> metrics, std::chrono::milliseconds interval,
             std::shared_ptr<Clock> clock);
  ~LagSampler();
  LagSampler(const LagSampler&) = delete;
  LagSampler& operator=(const LagSampler&) = delete;

  // Samples when due (see the file comment); sets the lag gauge on success.
  void maybe_sample();
  // Whether the next maybe_sample() would sample.
  [[nodiscard]] bool due();
  // The lag the last successful sample published; -1 before one. Any thread.
  [[nodiscard]] int64_t last() const { return last_.load(std::memory_order_relaxed); }

 private:
  void loop(std::stop_token st);

  const std::string binding_;
  std::shared_ptr<EventSource> source_;
  std::shared_ptr<metrics::MetricsRecorder> metrics_;
  const std::chrono::milliseconds interval_;
  std::shared_ptr<Clock> clock_;

  std::mutex mu_;
  std::condition_variable_any cv_;
  bool requested_ = false;
  bool running_ = false;
  uint64_t epoch_ = 0;  // completed samples
  std::optional<int64_t> value_;
  bool abandoned_ = false;  // the last sample ran out of its budget
  Clock::time_point next_due_{};
  std::atomic<int64_t> last_{-1};
  std::jthread thread_;
};

}  // namespace harvest::connector
