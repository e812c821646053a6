// Metrics reporting (ENG-13).
//
// Every harvest component reports through a `MetricsRecorder`. The default is
// `NoopMetrics`; `RecordingMetrics` keeps everything in memory for tests.
// Label values must come from bounded sets (workflow names, outcomes,
// reasons, binding names): never a key, offset or execution id.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace harvest::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

/// Metric names. The connector names live here so that the engine owns them
/// without depending on any connector code (CON-1).
inline constexpr const char* kEngineStarts = "harvest.engine.starts";
inline constexpr const char* kEngineRunsCompleted = "harvest.engine.runs_completed";
inline constexpr const char* kEngineRunsFailed = "harvest.engine.runs_failed";
/// ENG-17: runs that ended cancelled / were terminated ({workflow}).
inline constexpr const char* kEngineRunsCancelled = "harvest.engine.runs_cancelled";
inline constexpr const char* kEngineRunsTerminated = "harvest.engine.runs_terminated";
/// ENG-18: runs failed into the dead letters for crashing their workers
/// ({workflow}).
inline constexpr const char* kEngineRunsCrashed = "harvest.engine.runs_crashed";
/// Seconds one run attempt took, claim to outcome (histogram, {workflow}).
inline constexpr const char* kEngineRunSeconds = "harvest.engine.run_seconds";
/// Runnable executions waiting for a worker (gauge, no labels).
inline constexpr const char* kEngineQueueDepth = "harvest.engine.queue_depth";
/// Signals refused (labels: workflow, reason), e.g. to a closed run under
/// WorkflowIdReuse::kReject.
inline constexpr const char* kEngineSignalsRefused = "harvest.engine.signals_refused";
/// Signals an entity run left unread at completion, handed to its next run.
inline constexpr const char* kEngineSignalsCarried = "harvest.engine.signals_carried";
inline constexpr const char* kConnectorDispatched = "harvest.connector.dispatched";
inline constexpr const char* kConnectorDeadLettered = "harvest.connector.dead_lettered";
inline constexpr const char* kConnectorRetried = "harvest.connector.retried";
inline constexpr const char* kConnectorLag = "harvest.connector.lag";
/// Seconds from mapping a message to its durable commit (histogram).
inline constexpr const char* kConnectorDispatchSeconds = "harvest.connector.dispatch_seconds";
/// 1 while a binding waits for an unreachable store (intake paused), else 0
/// (gauge, {source}).
inline constexpr const char* kConnectorStoreUnavailable = "harvest.connector.store_unavailable";
/// Consumer rebuilds answering a stall (counter, {source}).
inline constexpr const char* kConnectorRecoveries = "harvest.connector.recoveries";
/// Messages taken from the broker and not yet settled: the pass being
/// dispatched, plus those held through a store outage (gauge, {source}).
inline constexpr const char* kConnectorInFlight = "harvest.connector.in_flight";
/// Unix time (seconds) at which the binding's last pass ended, whatever its
/// outcome (gauge, {source}). A value that stops moving is a wedged loop.
inline constexpr const char* kConnectorLastPass = "harvest.connector.last_pass_timestamp_seconds";
/// Coordinate collisions met: messages whose coordinate key was held by a run
/// or signal recorded from a different record (counter, {source}).
inline constexpr const char* kConnectorCollisions = "harvest.connector.coordinate_collisions";
/// 1 while the binding holds on a coordinate collision, else 0 (gauge, {source}).
inline constexpr const char* kConnectorCollisionHold = "harvest.connector.collision_hold";

/// The interface every harvest component reports metrics through. A series is
/// a metric name plus a label set; label order does not identify a series.
/// Components share one recorder through a shared_ptr (the engine's config
/// holds it). Thread-safe: implementations are called from many threads.
class MetricsRecorder {
 public:
  virtual ~MetricsRecorder() = default;
  /// Adds `by` (default 1) to a counter; an increment by 0 creates the series.
  virtual void increment(const std::string& name, const Labels& labels, double by = 1.0) = 0;
  /// Sets a gauge to `value`, replacing the previous one.
  virtual void set_gauge(const std::string& name, const Labels& labels, double value) = 0;
  /// Records one histogram sample (harvest's histograms are durations in seconds).
  virtual void observe(const std::string& name, const Labels& labels, double value) = 0;
};

/// The default recorder: discards everything. Stateless and thread-safe.
class NoopMetrics final : public MetricsRecorder {
 public:
  void increment(const std::string&, const Labels&, double) override {}
  void set_gauge(const std::string&, const Labels&, double) override {}
  void observe(const std::string&, const Labels&, double) override {}
};

/// Keeps every counter, gauge and observation in memory, for tests. Grows
/// with every series and sample and never forgets one. Thread-safe (one
/// mutex); label sets are compared order-insensitively.
class RecordingMetrics final : public MetricsRecorder {
 public:
  void increment(const std::string& name, const Labels& labels, double by) override;
  void set_gauge(const std::string& name, const Labels& labels, double value) override;
  void observe(const std::string& name, const Labels& labels, double value) override;

  /// Counter value for exactly these labels (order-insensitive); 0 if never set.
  [[nodiscard]] double counter(const std::string& name, const Labels& labels) const;
  /// Sum of a counter over all label sets.
  [[nodiscard]] double counter_total(const std::string& name) const;
  /// Last value of a gauge for exactly these labels; empty if never set.
  [[nodiscard]] std::optional<double> gauge(const std::string& name, const Labels& labels) const;
  /// Every sample observed for exactly these labels, in recording order.
  [[nodiscard]] std::vector<double> observations(const std::string& name,
                                                 const Labels& labels) const;
  /// Every label set ever used with any metric.
  [[nodiscard]] std::vector<std::pair<std::string, Labels>> series() const;

 private:
  static Labels sorted(Labels l);
  mutable std::mutex mu_;
  std::map<std::pair<std::string, Labels>, double> counters_;
  std::map<std::pair<std::string, Labels>, double> gauges_;
  std::map<std::pair<std::string, Labels>, std::vector<double>> observations_;
};

}  // namespace harvest::metrics
