// The HTTP API's route table as data (ENG-12): every route's method, path
// template, the request-body members and query parameters it accepts, the
// statuses it can answer and whether it needs the bearer token. The server
// builds its table from `route_specs`, the handlers take their accepted
// fields from the constants below, and tests/api/openapi_test.cpp checks
// docs/openapi.yaml against the same data, so the three cannot drift apart.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/api/router.hpp>

namespace harvest::api {

// Request-body members each route accepts (any other member is a 400).
namespace body_fields {
inline constexpr std::array<std::string_view, 3> kStart = {"workflow_id", "input",
                                                           "idempotency_key"};
inline constexpr std::array<std::string_view, 6> kSignalWithStart = {
    "workflow_id", "input", "signal", "payload", "idempotency_key", "workflow_id_reuse"};
inline constexpr std::array<std::string_view, 2> kSignal = {"payload", "idempotency_key"};
// The connector dead-letter filter (at least one member must be set).
inline constexpr std::array<std::string_view, 6> kConnectorDeadLetterPurge = {
    "id", "binding", "stream", "reason", "since", "until"};
inline constexpr std::array<std::string_view, 7> kConnectorDeadLetterReplay = {
    "id", "binding", "stream", "reason", "since", "until", "requested_by"};
// Cancel / terminate one run, and the bulk forms (ENG-17).
inline constexpr std::array<std::string_view, 2> kStop = {"reason", "requested_by"};
inline constexpr std::array<std::string_view, 5> kBulkStop = {"workflow", "status", "reason",
                                                              "requested_by", "dry_run"};
}  // namespace body_fields

// Query parameters each route accepts (any other parameter is a 400).
namespace query_params {
inline constexpr std::array<std::string_view, 10> kListExecutions = {
    "workflow",   "status", "start_source", "workflow_id", "workflow_id_prefix",
    "source_ref", "since",  "until",        "limit",       "cursor"};
inline constexpr std::array<std::string_view, 1> kOverview = {"window_seconds"};
inline constexpr std::array<std::string_view, 2> kListDeadLetters = {"limit", "cursor"};
inline constexpr std::array<std::string_view, 7> kListConnectorDeadLetters = {
    "binding", "stream", "reason", "since", "until", "limit", "cursor"};
}  // namespace query_params

// Who may call a route when ApiConfig::token is set.
enum class RouteAuth {
  kToken,     // needs `Authorization: Bearer <token>`
  kNone,      // never needs it (/healthz)
  kOptional,  // needs it only with metrics_require_token (/metrics)
};

struct RouteSpec {
  // Handler and `route` label of harvest.api.requests, e.g. "start".
  std::string name;
  Method method = Method::kGet;
  // The path with the prefix applied and `{name}` placeholders for path
  // parameters, e.g. "/api/harvest/workflows/{name}/start".
  std::string path;
  // Request-body members accepted (empty for a route without a body), and
  // those of them the route requires.
  std::span<const std::string_view> body_fields;
  std::vector<std::string_view> required_body_fields;
  // Query parameters accepted.
  std::span<const std::string_view> query_params;
  RouteAuth auth = RouteAuth::kToken;
  // Served by the control thread (answers while every request thread is busy).
  bool control = false;
  // Every status this route can answer, ascending: its own outcomes and
  // errors plus the server's access checks and limits that apply to it.
  std::vector<int> statuses;
};

// The route table with `prefix` (ApiConfig::prefix) applied to every route
// but /healthz and /metrics, in match order.
[[nodiscard]] std::vector<RouteSpec> route_specs(std::string_view prefix);

// The router pattern of a spec: each `{name}` segment becomes a capture.
[[nodiscard]] RoutePattern route_pattern(const RouteSpec& spec);

}  // namespace harvest::api
