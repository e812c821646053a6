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

/// Histogram bucket upper bounds, in the unit of the observed value.
using Buckets = std::vector<double>;

/// Histogram buckets of a PrometheusMetrics. Copied by the recorder at
/// construction.
struct PrometheusOptions {
  /// Buckets of observations whose name has no entry in `buckets`, in
  /// seconds for harvest's own histograms. Default: Prometheus' default
  /// latency buckets, 5 ms to 10 s.
  Buckets default_buckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  /// Buckets by harvest metric name, in seconds for harvest's own
  /// histograms. Default: workflow run durations (kEngineRunSeconds) from
  /// 5 ms to a day (runs may sleep durably), connector dispatch
  /// (kConnectorDispatchSeconds) from 0.5 ms to 5 s.
  std::map<std::string, Buckets, std::less<>> buckets = {
      {kEngineRunSeconds,
       {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600,
        86400}},
      {kConnectorDispatchSeconds,
       {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}},
  };
};

/// A MetricsRecorder that keeps every series in its own prometheus-cpp
/// registry and renders them for a `/metrics` endpoint (see the file
/// comment). Construct one, share it (by `shared_ptr`) as the recorder of the
/// engine and connectors, and serve `render()` from the HTTP API; it owns its
/// registry and every series recorded, which live until it is destroyed.
/// Not copyable.
///
/// Thread-safe: every method may be called from any thread at any time. A
/// metric family is created on first use of its name. A name used with two
/// kinds whose Prometheus names collide (a gauge and a histogram of one name),
/// or a label name Prometheus rejects after sanitising, is dropped with one
/// warning per name; recording never throws.
class PrometheusMetrics final : public MetricsRecorder {
 public:
  /// A recorder with no series yet, bucketing histograms as `options` says.
  explicit PrometheusMetrics(PrometheusOptions options = {});
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  /// Adds `by` to counter `exposition_name(name, Kind::kCounter)`. Label
  /// names go through `label_name`, values are made valid UTF-8.
  void increment(const std::string& name, const Labels& labels, double by = 1.0) override;
  /// Sets gauge `exposition_name(name, Kind::kGauge)` to `value`; labels as
  /// for `increment`.
  void set_gauge(const std::string& name, const Labels& labels, double value) override;
  /// Records `value` in histogram `exposition_name(name, Kind::kHistogram)`,
  /// whose buckets come from PrometheusOptions when the label set is first
  /// seen; labels as for `increment`.
  void observe(const std::string& name, const Labels& labels, double value) override;

  /// Every metric recorded so far in the text exposition format 0.0.4.
  [[nodiscard]] std::string render() const;

  /// The HTTP Content-Type of `render()`'s output.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  /// How a harvest metric is exported, which decides its Prometheus name.
  enum class Kind {
    kCounter,   ///< from increment(): the name gets a `_total` suffix
    kGauge,     ///< from set_gauge(): the name as sanitised
    kHistogram  ///< from observe(): the name as sanitised
  };
  /// The Prometheus name of harvest metric `name` recorded as `kind`: every
  /// character outside [a-zA-Z0-9_:] becomes '_', a leading digit gets a '_'
  /// before it, and a counter gets `_total` unless it already ends so.
  [[nodiscard]] static std::string exposition_name(std::string_view name, Kind kind);
  /// A label name Prometheus accepts ([a-zA-Z_][a-zA-Z0-9_]*, no leading "__"):
  /// other characters become '_', a leading digit gets a '_' before it, and
  /// a run of leading underscores is cut to one.
  [[nodiscard]] static std::string label_name(std::string_view name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harvest::metrics
