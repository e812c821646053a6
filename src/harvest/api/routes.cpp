#include <algorithm>
#include <initializer_list>

#include <harvest/api/routes.hpp>

namespace harvest::api {

namespace {

// What the server itself may answer on any route, before or around its
// handler: 400 a malformed request or a missing Host header, 413/414/431 the
// read limits, 421 a Host outside allowed_hosts, 500 an unexpected failure,
// 503 over the connection cap, stopping, or a transient store failure.
constexpr std::initializer_list<int> kServerStatuses = {400, 413, 414, 421, 431, 500, 503};

RouteSpec spec(std::string name, Method method, std::string path,
               std::initializer_list<int> handler_statuses, RouteAuth auth = RouteAuth::kToken) {
  RouteSpec s{.name = std::move(name),
              .method = method,
              .path = std::move(path),
              .body_fields = {},
              .required_body_fields = {},
              .query_params = {},
              .auth = auth,
              .control = false,
              .statuses = handler_statuses};
  s.statuses.insert(s.statuses.end(), kServerStatuses);
  if (auth != RouteAuth::kNone) s.statuses.push_back(401);
  // Content-Type is checked on every POST.
  if (method == Method::kPost) s.statuses.push_back(415);
  std::ranges::sort(s.statuses);
  auto [first, last] = std::ranges::unique(s.statuses);
  s.statuses.erase(first, last);
  return s;
}

}  // namespace

std::vector<RouteSpec> route_specs(std::string_view prefix) {
  const std::string p(prefix);
  std::vector<RouteSpec> out;

  // 201 started, 200 idempotent replay, 202 deferred (throttled); 404 an
  // unknown workflow; 422 an input the workflow refuses.
  out.push_back(
      spec("start", Method::kPost, p + "/workflows/{name}/start", {200, 201, 202, 404, 422}));
  out.back().body_fields = body_fields::kStart;
  out.back().required_body_fields = {"input"};

  // 201 a new run, 200 the signal joined a running one; 409 a closed run
  // under workflow_id_reuse "reject".
  out.push_back(spec("signal_with_start", Method::kPost, p + "/workflows/{name}/signal-with-start",
                     {200, 201, 404, 409, 422}));
  out.back().body_fields = body_fields::kSignalWithStart;
  out.back().required_body_fields = {"workflow_id", "signal"};

  // 404 no such execution; 409 the execution is closed.
  out.push_back(spec("signal_execution", Method::kPost,
                     p + "/executions/{execution_id}/signals/{signal}", {200, 404, 409}));
  out.back().body_fields = body_fields::kSignal;
  out.push_back(spec("signal_workflow", Method::kPost,
                     p + "/workflows/{name}/executions/{workflow_id}/signals/{signal}",
                     {200, 404, 409}));
  out.back().body_fields = body_fields::kSignal;

  // ENG-17. Cancel: 202 recorded (the run sees it at its next durable
  // operation), 200 already requested; terminate: 200. 404 no such
  // execution; 409 a closed run.
  out.push_back(spec("cancel_execution", Method::kPost, p + "/executions/{execution_id}/cancel",
                     {200, 202, 404, 409}));
  out.back().body_fields = body_fields::kStop;
  out.back().required_body_fields = {"reason"};
  out.push_back(spec("terminate_execution", Method::kPost,
                     p + "/executions/{execution_id}/terminate", {200, 404, 409}));
  out.back().body_fields = body_fields::kStop;
  out.back().required_body_fields = {"reason"};
  // Every open run of a workflow (optionally of one status); dry_run counts.
  out.push_back(spec("cancel_executions", Method::kPost, p + "/executions/cancel", {200}));
  out.back().body_fields = body_fields::kBulkStop;
  out.back().required_body_fields = {"workflow", "reason"};
  out.push_back(spec("terminate_executions", Method::kPost, p + "/executions/terminate", {200}));
  out.back().body_fields = body_fields::kBulkStop;
  out.back().required_body_fields = {"workflow", "reason"};

  out.push_back(spec("get_execution", Method::kGet, p + "/executions/{execution_id}", {200, 404}));
  out.push_back(spec("list_executions", Method::kGet, p + "/executions", {200}));
  out.back().query_params = query_params::kListExecutions;
  // The console's overview: runs by workflow and status, recent starts and
  // completions; and the connector bindings of this process.
  out.push_back(spec("overview", Method::kGet, p + "/overview", {200}));
  out.back().query_params = query_params::kOverview;
  // The overview's charts: the last hour per minute, and each binding's lag.
  out.push_back(spec("overview_history", Method::kGet, p + "/overview/history", {200}));
  out.push_back(spec("connectors", Method::kGet, p + "/connectors", {200}));
  out.push_back(spec("list_dead_letters", Method::kGet, p + "/dead-letters", {200}));
  out.back().query_params = query_params::kListDeadLetters;
  // 404 no such execution; 409 it is no longer failed.
  out.push_back(spec("replay_dead_letter", Method::kPost, p + "/dead-letters/{execution_id}/replay",
                     {200, 404, 409}));

  // Connector dead letters (dead-lettered broker messages) for operators. Replay
  // only marks rows: the binding's runtime, which holds the mapper, replays
  // them.
  out.push_back(
      spec("list_connector_dead_letters", Method::kGet, p + "/connector-dead-letters", {200}));
  out.back().query_params = query_params::kListConnectorDeadLetters;
  // 400 an id that is not a uuid; 404 no such row.
  out.push_back(spec("get_connector_dead_letter", Method::kGet, p + "/connector-dead-letters/{id}",
                     {200, 404}));
  // 400 without a filter (or requested_by), or a filter value out of bounds.
  out.push_back(spec("replay_connector_dead_letters", Method::kPost,
                     p + "/connector-dead-letters/replay", {200}));
  out.back().body_fields = body_fields::kConnectorDeadLetterReplay;
  out.back().required_body_fields = {"requested_by"};
  out.push_back(spec("purge_connector_dead_letters", Method::kPost,
                     p + "/connector-dead-letters/purge", {200}));
  out.back().body_fields = body_fields::kConnectorDeadLetterPurge;

  // 503 when a shard is not readable.
  out.push_back(spec("healthz", Method::kGet, "/healthz", {200, 503}, RouteAuth::kNone));
  out.back().control = true;
  // 404 when no Prometheus exporter is configured.
  out.push_back(spec("metrics", Method::kGet, "/metrics", {200, 404}, RouteAuth::kOptional));
  out.back().control = true;
  return out;
}

RoutePattern route_pattern(const RouteSpec& spec) {
  RoutePattern pattern = route_pattern(spec.method, spec.path);
  for (auto& seg : pattern.segments) {
    if (seg.size() >= 2 && seg.front() == '{' && seg.back() == '}') seg = "{}";
  }
  return pattern;
}

}  // namespace harvest::api
