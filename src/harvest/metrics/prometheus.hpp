// A `MetricsRecorder` that exports to Prometheus (ENG-13), on prometheus-cpp.
//
// harvest metric names map to Prometheus names by replacing every character
// Prometheus does not allow (the dots) with '_': counters get a `_total`
// suffix (`harvest.engine.starts` → `harvest_engine_starts_total`), gauges
// keep their name, observations become histograms (`harvest.engine.run_seconds`
// → `harvest_engine_run_seconds_bucket/_sum/_count`). `render()` produces the
// text exposition format 0.0.4 for a `/metrics` endpoint; this library serves
// nothing itself (the HTTP API does).
//
// Label values must come from bounded sets (workflow names, outcomes,
// reasons): every distinct label set is a time series kept for the life of
// the process. The recorder does not enforce it; callers do.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/metrics/recorder.hpp>

namespace harvest::metrics {

// Histogram bucket upper bounds, in the unit of the observed value.
using Buckets = std::vector<double>;

struct PrometheusOptions {
  // Buckets of observations whose name has no entry in `buckets`. Default:
  // Prometheus' default latency buckets, 5 ms to 10 s.
  Buckets default_buckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  // Buckets by harvest metric name. Default: workflow run durations from 5 ms
  // to a day (runs may sleep durably), connector dispatch from 0.5 ms to 5 s.
  std::map<std::string, Buckets, std::less<>> buckets = {
      {kEngineRunSeconds,
       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600,
        86400}},
      {kConnectorDispatchSeconds,
       {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}},
  };
};

// Thread-safe: every method may be called from any thread at any time. A
// metric family is created on first use of its name. A name used with two
// kinds whose Prometheus names collide (a gauge and a histogram of one name),
// or a label name Prometheus rejects after sanitising, is dropped with one
// warning per name; recording never throws.
class PrometheusMetrics final : public MetricsRecorder {
 public:
  explicit PrometheusMetrics(PrometheusOptions options = {});
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  void increment(const std::string& name, const Labels& labels, double by = 1.0) override;
  void set_gauge(const std::string& name, const Labels& labels, double value) override;
  void observe(const std::string& name, const Labels& labels, double value) override;

  // Every metric recorded so far in the text exposition format 0.0.4.
  [[nodiscard]] std::string render() const;

  // The HTTP Content-Type of `render()`'s output.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  enum class Kind { kCounter, kGauge, kHistogram };
  // The Prometheus name of harvest metric `name` recorded as `kind`.
  [[nodiscard]] static std::string exposition_name(std::string_view name, Kind kind);
  // A label name Prometheus accepts ([a-zA-Z_][a-zA-Z0-9_]*, no leading "__").
  [[nodiscard]] static std::string label_name(std::string_view name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harvest::metrics
