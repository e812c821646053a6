#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>
#include <mutex>
#include <set>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/metrics/prometheus.hpp>

namespace harvest::metrics {

namespace {

// Replaces every character outside [a-zA-Z0-9_] (and `extra`) with '_', and
// prefixes '_' when the first character may not start a name.
std::string sanitise(std::string_view name, std::string_view extra) {
  std::string out;
  out.reserve(name.size() + 1);
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || extra.find(c) != std::string_view::npos;
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

// The HELP text of the metrics harvest itself records.
std::string help_for(const std::string& name) {
  static const std::map<std::string, std::string, std::less<>> kHelp = {
      {kEngineStarts, "Workflow starts by workflow and outcome"},
      {kEngineRunsCompleted, "Workflow runs completed, by workflow"},
      {kEngineRunsFailed, "Workflow runs failed for good (retries exhausted), by workflow"},
      {kEngineRunsCancelled, "Workflow runs that ended cancelled, by workflow"},
      {kEngineRunsTerminated, "Workflow runs terminated by an operator, by workflow"},
      {kEngineRunsCrashed,
       "Workflow runs dead-lettered for crashing their workers (poison-pill threshold), by "
       "workflow"},
      {kEngineRunSeconds, "Seconds one run attempt took, claim to outcome, by workflow"},
      {kEngineQueueDepth, "Runnable executions waiting for a worker"},
      {kEngineSignalsRefused, "Signals refused (e.g. to a closed run), by workflow and reason"},
      {kConnectorDispatched, "Broker messages dispatched to the engine, by source and outcome"},
      {kConnectorDeadLettered, "Broker messages dead-lettered, by source and reason"},
      {kConnectorRetried, "Broker messages left for redelivery, by source and reason"},
      {kConnectorLag, "Broker messages still owed (uncommitted and in flight), by source"},
      {kConnectorDispatchSeconds, "Seconds from mapping a message to its durable commit"},
      {kConnectorStoreUnavailable, "1 while a source waits for an unreachable store, by source"},
      {kConnectorRecoveries, "Consumer rebuilds answering a stalled partition, by source"},
      {"harvest.api.requests", "HTTP API requests served, by route and status"},
  };
  auto it = kHelp.find(name);
  return it == kHelp.end() ? "harvest metric " + name : it->second;
}

}  // namespace

std::string PrometheusMetrics::exposition_name(std::string_view name, Kind kind) {
  std::string out = sanitise(name, ":");
  if (kind == Kind::kCounter && !std::string_view(out).ends_with("_total")) out += "_total";
  return out;
}

std::string PrometheusMetrics::label_name(std::string_view name) {
  std::string out = sanitise(name, "");
  // Names starting with "__" are reserved for Prometheus' own use.
  while (out.size() > 1 && out.starts_with("__")) out.erase(0, 1);
  return out;
}

struct PrometheusMetrics::Impl {
  explicit Impl(PrometheusOptions o) : options(std::move(o)) {}

  // Returns the family of `name` (created on first use), or nullptr when the
  // name cannot be registered as this kind. Families live as long as the
  // registry, so the returned pointer stays valid.
  template <typename T, typename Build>
  prometheus::Family<T>* family(
      std::map<std::string, prometheus::Family<T>*, std::less<>>& families, const std::string& name,
      Kind kind, Build build) {
    std::lock_guard lock(mu);
    if (auto it = families.find(name); it != families.end()) return it->second;
    prometheus::Family<T>* fam = nullptr;
    try {
      fam = &build().Name(exposition_name(name, kind)).Help(help_for(name)).Register(registry);
    } catch (const std::exception& e) {
      warn_once_locked(name, e.what());
    }
    families.emplace(name, fam);
    return fam;
  }

  void warn_once(const std::string& name, const char* what) {
    std::lock_guard lock(mu);
    warn_once_locked(name, what);
  }

  void warn_once_locked(const std::string& name, const char* what) {
    if (warned.insert(name).second) {
      log::warn("metric {} cannot be exported to Prometheus and is dropped: {}", name, what);
    }
  }

  const Buckets& buckets(const std::string& name) const {
    auto it = options.buckets.find(name);
    return it == options.buckets.end() ? options.default_buckets : it->second;
  }

  static prometheus::Labels convert(const Labels& labels) {
    prometheus::Labels out;
    // Label values must be UTF-8 for the exposition to parse; whatever
    // reaches a label (a broker's topic name, say) is made so.
    for (const auto& [k, v] : labels) out[label_name(k)] = to_valid_utf8(v);
    return out;
  }

  const PrometheusOptions options;
  prometheus::Registry registry;
  std::mutex mu;  // guards the maps below; families lock themselves
  std::map<std::string, prometheus::Family<prometheus::Counter>*, std::less<>> counters;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*, std::less<>> gauges;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*, std::less<>> histograms;
  std::set<std::string, std::less<>> warned;
};

PrometheusMetrics::PrometheusMetrics(PrometheusOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::increment(const std::string& name, const Labels& labels, double by) {
  auto* fam = impl_->family(impl_->counters, name, Kind::kCounter, prometheus::BuildCounter);
  if (!fam) return;
  try {
    fam->Add(Impl::convert(labels)).Increment(by);
  } catch (const std::exception& e) {
    impl_->warn_once(name, e.what());
  }
}

void PrometheusMetrics::set_gauge(const std::string& name, const Labels& labels, double value) {
  auto* fam = impl_->family(impl_->gauges, name, Kind::kGauge, prometheus::BuildGauge);
  if (!fam) return;
  try {
    fam->Add(Impl::convert(labels)).Set(value);
  } catch (const std::exception& e) {
    impl_->warn_once(name, e.what());
  }
}

void PrometheusMetrics::observe(const std::string& name, const Labels& labels, double value) {
  auto* fam = impl_->family(impl_->histograms, name, Kind::kHistogram, prometheus::BuildHistogram);
  if (!fam) return;
  try {
    // The buckets apply when this label set is first added; later calls find
    // the existing histogram.
    fam->Add(Impl::convert(labels), impl_->buckets(name)).Observe(value);
  } catch (const std::exception& e) {
    impl_->warn_once(name, e.what());
  }
}

std::string PrometheusMetrics::render() const {
  return prometheus::TextSerializer().Serialize(impl_->registry.Collect());
}

}  // namespace harvest::metrics
