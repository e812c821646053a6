// Small helpers for the benchmark programs: latency percentiles and RSS.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "footprint.hpp"

namespace harvest::bench {

inline double percentile_ms(std::vector<double> samples_us, double p) {
  if (samples_us.empty()) return 0;
  std::sort(samples_us.begin(), samples_us.end());
  size_t idx = std::min(samples_us.size() - 1, static_cast<size_t>(p * samples_us.size()));
  return samples_us[idx] / 1000.0;
}

// A memory figure of this process from /proc/self/status, in MiB.
inline double status_mib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == field) {
      double kb;
      f >> kb;
      return kb / 1024.0;
    }
    std::getline(f, key);
  }
  return 0;
}

// Resident set size now, and its peak (VmHWM), in MiB.
inline double rss_mib() {
  return status_mib("VmRSS:");
}
inline double peak_rss_mib() {
  return status_mib("VmHWM:");
}

// The machine-readable line scripts/bench.sh collects, one per case:
// RESULT case=<name> msgs_per_s=<x> ceiling_msgs_per_s=<y> ratio=<x/y> ...
// [wal_bytes_per_msg=<> rows_per_msg=<> cpu_us_per_msg=<>] (with `figures`).
inline void result_line(const std::string& name, double msgs_per_s, double ceiling,
                        const std::vector<double>& lat_us, double rss,
                        const std::optional<Figures>& figures = std::nullopt) {
  std::printf(
      "RESULT case=%s msgs_per_s=%.0f ceiling_msgs_per_s=%.0f ratio=%.3f p50_ms=%.2f "
      "p99_ms=%.2f rss_mib=%.1f",
      name.c_str(), msgs_per_s, ceiling, ceiling > 0 ? msgs_per_s / ceiling : 0.0,
      percentile_ms(lat_us, 0.5), percentile_ms(lat_us, 0.99), rss);
  if (figures) {
    std::printf(" wal_bytes_per_msg=%.0f rows_per_msg=%.2f cpu_us_per_msg=%.1f",
                figures->wal_bytes_per_msg, figures->rows_per_msg, figures->cpu_us_per_msg);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace harvest::bench
