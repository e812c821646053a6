// `harvest connectors status`: what every connector binding of a running
// harvest process reports, read from its Prometheus exposition (GET /metrics
// of the HTTP API), one line per binding.
//
// Several `--metrics-url`s (the replicas of one service) are read alike and
// combined the way the starter dashboard does: lag owed is the maximum over
// replicas (each replica samples the whole source, so summing would count
// the same backlog once per replica), in flight, stalls and counters are
// summed, last pass is the newest. A replica that cannot be read fails the
// command (exit 1) after the others are shown, naming the URL.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>

namespace harvest::cli {

// One binding as the exposition describes it (series labelled source=NAME).
struct BindingStatus {
  std::optional<double> lag;        // harvest_connector_lag; absent before the first sample
  double in_flight = 0;             // harvest_connector_in_flight
  std::optional<double> last_pass;  // harvest_connector_last_pass_timestamp_seconds (unix s)
  double stalls = 0;                // harvest_connector_recoveries_total
  bool store_unavailable = false;   // harvest_connector_store_unavailable == 1
  double dispatched = 0;            // harvest_connector_dispatched_total, every outcome
  double dead_lettered = 0;         // harvest_connector_dead_lettered_total, every reason
  double retried = 0;               // harvest_connector_retried_total, every reason
  double collisions = 0;            // harvest_connector_coordinate_collisions_total
  bool holding = false;             // harvest_connector_collision_hold == 1
  int processes = 0;                // expositions that name this binding
};

// Longest exposition read, in bytes; a larger one fails the scrape.
inline constexpr size_t kMaxExpositionBytes = 16u << 20;

// The bindings of one exposition (text format 0.0.4), by source label.
// Lines that are not harvest connector samples are skipped; a malformed
// sample line is an error naming its line number.
[[nodiscard]] Result<std::map<std::string, BindingStatus>> parse_connector_status(
    const std::string& exposition);

// Folds `more` (another process) into `into`, as the file comment says.
void merge_status(std::map<std::string, BindingStatus>& into,
                  const std::map<std::string, BindingStatus>& more);

// GET `url` (http only) with an optional bearer token; the body of a 200.
// Bounded: connect and whole-exchange timeout `timeout`, body at most
// kMaxExpositionBytes. Any other status is an error naming it.
[[nodiscard]] Result<std::string> http_get(const std::string& url, const std::string& token,
                                           std::chrono::milliseconds timeout);

struct ConnectorsOptions {
  std::vector<std::string> metrics_urls;
  std::string token;
  int timeout_ms = 5000;
  CLI::App* status = nullptr;

  [[nodiscard]] bool parsed() const { return status->parsed(); }
};

void add_connectors_commands(CLI::App& app, ConnectorsOptions& o);

// Exit codes: 0 every URL read, 1 a URL could not be read or parsed.
[[nodiscard]] int run_connectors_status(const ConnectorsOptions& o, bool json, std::ostream& out,
                                        std::ostream& err);

}  // namespace harvest::cli
