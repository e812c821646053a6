// The HTTP API's route logic, independent of the HTTP library: each handler
// takes an `ApiRequest` (path captures, query, body, the Idempotency-Key
// header) and answers an `ApiResponse`. `http_server.cpp` is the only code
// that touches the HTTP library. Internal to harvest_api.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <harvest/api/http_server.hpp>
#include <harvest/api/views.hpp>
#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/metrics/prometheus.hpp>

namespace harvest::api {

struct ApiRequest {
  // Path captures in route order, e.g. {workflow name} for the start route.
  std::vector<std::string> params;
  // The first value of each query parameter.
  std::map<std::string, std::string, std::less<>> query;
  std::string body;
  // Every Idempotency-Key header sent (more than one is a bad request).
  std::vector<std::string> idempotency_key_headers;
};

struct ApiResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  // What went wrong inside, for the log line (under the request id) only:
  // never sent. Set for 5xx answers.
  std::string log_detail;
};

// A JSON response.
[[nodiscard]] ApiResponse json_response(int status, const Json& body);
// {"error": "<kind>", "message": "<what was wrong>"} with the status of
// `error.kind` (http_status); a transient error also carries Retry-After. A
// 5xx answer says only what kind of failure it was; the error's own message
// and detail go to `log_detail`.
[[nodiscard]] ApiResponse error_response(const Error& error);
// An error the HTTP layer detects itself (unknown route, body too large).
[[nodiscard]] ApiResponse error_response(int status, std::string_view kind, std::string message);

// Thread-safe (the engine is; the handlers keep no state of their own).
// Keeps references to `engine` and `exporter`.
class OverviewCache;
class ConsoleHistory;

class Handlers {
 public:
  // `exporter` may be null: /metrics then answers 404 saying how to enable it.
  // Request bodies are parsed within `json` (depth and size).
  Handlers(engine::Engine& engine, std::string prefix,
           std::shared_ptr<metrics::PrometheusMetrics> exporter, JsonLimits json = {});
  ~Handlers();
  Handlers(const Handlers&) = delete;
  Handlers& operator=(const Handlers&) = delete;
  // What the console's routes read beside the engine: the process's
  // bindings (may be unset: none) and the trace link template (may be empty).
  // `lag_every`: how often the bindings' lag is sampled for the history.
  void set_console_sources(std::function<std::vector<BindingOverview>()> bindings,
                           std::string trace_url_template,
                           std::chrono::milliseconds lag_every = std::chrono::seconds(15));

  // POST {prefix}/workflows/{name}/start
  [[nodiscard]] ApiResponse start(const ApiRequest& req);
  // POST {prefix}/workflows/{name}/signal-with-start
  [[nodiscard]] ApiResponse signal_with_start(const ApiRequest& req);
  // POST {prefix}/executions/{id}/signals/{signal}
  [[nodiscard]] ApiResponse signal_execution(const ApiRequest& req);
  // POST {prefix}/workflows/{name}/executions/{workflow_id}/signals/{signal}
  [[nodiscard]] ApiResponse signal_workflow(const ApiRequest& req);
  // POST {prefix}/executions/{id}/cancel|terminate {reason, requested_by}
  [[nodiscard]] ApiResponse cancel_execution(const ApiRequest& req);
  [[nodiscard]] ApiResponse terminate_execution(const ApiRequest& req);
  // POST {prefix}/executions/cancel|terminate {workflow, status, reason,
  // requested_by, dry_run}
  [[nodiscard]] ApiResponse cancel_executions(const ApiRequest& req);
  [[nodiscard]] ApiResponse terminate_executions(const ApiRequest& req);
  // GET {prefix}/executions/{id}
  [[nodiscard]] ApiResponse get_execution(const ApiRequest& req);
  // GET {prefix}/executions?workflow=&status=&start_source=&workflow_id=
  //   &workflow_id_prefix=&source_ref=&since=&until=&limit=&cursor=
  [[nodiscard]] ApiResponse list_executions(const ApiRequest& req);
  // GET {prefix}/overview?window_seconds= (counted in the background at
  // most every 2 s per window; the answer's `as_of` says when)
  [[nodiscard]] ApiResponse overview(const ApiRequest& req);
  // GET {prefix}/overview/history: the last hour per minute, and lag samples
  [[nodiscard]] ApiResponse overview_history(const ApiRequest& req);
  // GET {prefix}/connectors
  [[nodiscard]] ApiResponse connectors(const ApiRequest& req);
  // GET {prefix}/dead-letters?limit=
  [[nodiscard]] ApiResponse list_dead_letters(const ApiRequest& req);
  // POST {prefix}/dead-letters/{execution_id}/replay
  [[nodiscard]] ApiResponse replay_dead_letter(const ApiRequest& req);
  // GET {prefix}/connector-dead-letters?binding=&stream=&reason=&since=&until=&limit=
  [[nodiscard]] ApiResponse list_connector_dead_letters(const ApiRequest& req);
  // GET {prefix}/connector-dead-letters/{id}
  [[nodiscard]] ApiResponse get_connector_dead_letter(const ApiRequest& req);
  // POST {prefix}/connector-dead-letters/replay {filter..., requested_by}
  [[nodiscard]] ApiResponse replay_connector_dead_letters(const ApiRequest& req);
  // POST {prefix}/connector-dead-letters/purge {filter...}
  [[nodiscard]] ApiResponse purge_connector_dead_letters(const ApiRequest& req);
  // GET /healthz: 200 when every shard answers, 503 otherwise.
  [[nodiscard]] ApiResponse health(const ApiRequest& req);
  // GET /metrics: the Prometheus text exposition.
  [[nodiscard]] ApiResponse metrics(const ApiRequest& req);

 private:
  [[nodiscard]] ApiResponse signal(const ApiRequest& req, engine::SignalTarget target,
                                   const std::string& name);
  [[nodiscard]] ApiResponse stop(const ApiRequest& req, bool terminate);
  [[nodiscard]] ApiResponse stop_where(const ApiRequest& req, bool terminate);

  engine::Engine& engine_;
  // Over the engine's first shard, which holds the connector's tables.
  connector_dlq::DeadLetterStore connector_dead_letters_;
  std::string prefix_;
  std::shared_ptr<metrics::PrometheusMetrics> exporter_;
  JsonLimits json_;
  std::function<std::vector<BindingOverview>()> bindings_;
  std::string trace_url_template_;
  // The overview's counts read every run (a GROUP BY over the table): one
  // answer per window serves every console, refreshed in the background.
  std::unique_ptr<OverviewCache> overview_cache_;
  std::unique_ptr<ConsoleHistory> history_;  // made by set_console_sources
};

}  // namespace harvest::api
