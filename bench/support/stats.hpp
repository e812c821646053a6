// Small helpers for the benchmark programs: latency percentiles and RSS.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace harvest::bench {

inline double percentile_ms(std::vector<double> samples_us, double p) {
  if (samples_us.empty()) return 0;
  std::sort(samples_us.begin(), samples_us.end());
  size_t idx = std::min(samples_us.size() - 1, static_cast<size_t>(p * samples_us.size()));
  return samples_us[idx] / 1000.0;
}

// Resident set size of this process in MiB (from /proc/self/status).
inline double rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      double kb;
      f >> kb;
      return kb / 1024.0;
    }
    std::getline(f, key);
  }
  return 0;
}

}  // namespace harvest::bench
