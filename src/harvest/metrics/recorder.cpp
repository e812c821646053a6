#include <algorithm>

#include <harvest/metrics/recorder.hpp>

namespace harvest::metrics {

Labels RecordingMetrics::sorted(Labels l) {
  std::sort(l.begin(), l.end());
  return l;
}

void RecordingMetrics::increment(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  counters_[{name, sorted(labels)}] += by;
}

void RecordingMetrics::set_gauge(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  gauges_[{name, sorted(labels)}] = value;
}

void RecordingMetrics::observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  observations_[{name, sorted(labels)}].push_back(value);
}

double RecordingMetrics::counter(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto it = counters_.find({name, sorted(labels)});
  return it == counters_.end() ? 0.0 : it->second;
}

double RecordingMetrics::counter_total(const std::string& name) const {
  std::lock_guard lock(mu_);
  double total = 0;
  for (const auto& [k, v] : counters_) {
    if (k.first == name) total += v;
  }
  return total;
}

std::optional<double> RecordingMetrics::gauge(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto it = gauges_.find({name, sorted(labels)});
  if (it == gauges_.end()) return std::nullopt;
  return it->second;
}

std::vector<double> RecordingMetrics::observations(const std::string& name,
                                                   const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto it = observations_.find({name, sorted(labels)});
  return it == observations_.end() ? std::vector<double>{} : it->second;
}

std::vector<std::pair<std::string, Labels>> RecordingMetrics::series() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, Labels>> out;
  for (const auto& [k, v] : counters_) out.push_back(k);
  for (const auto& [k, v] : gauges_) out.push_back(k);
  for (const auto& [k, v] : observations_) out.push_back(k);
  return out;
}

}  // namespace harvest::metrics
