// The engine's HTTP API (ENG-12): start, signal-with-start, signal, read
// executions, engine dead letters, health and Prometheus metrics, as JSON over
// HTTP/1.1 with keep-alive.
//
// Routes (prefix default `/api/harvest`):
//   POST {prefix}/workflows/{name}/start                        201 | 200 | 202
//   POST {prefix}/workflows/{name}/signal-with-start            201 | 200
//   POST {prefix}/executions/{id}/signals/{signal}              200
//   POST {prefix}/workflows/{name}/executions/{workflow_id}/signals/{signal}  200
//   GET  {prefix}/executions/{id}                               200
//   GET  {prefix}/executions?workflow=&status=&start_source=&limit=&cursor=
//   GET  {prefix}/dead-letters?limit=
//   POST {prefix}/dead-letters/{execution_id}/replay            200
//   GET  {prefix}/connector-dead-letters?binding=&stream=&reason=&since=&until=&limit=
//   GET  {prefix}/connector-dead-letters/{id}                   200
//   POST {prefix}/connector-dead-letters/replay                 200
//   POST {prefix}/connector-dead-letters/purge                  200
//   GET  {prefix}/overview                                      200
//   GET  {prefix}/connectors                                    200
//   GET  /healthz, GET /metrics                                 (not under the prefix)
//   GET  /ui/…   the web console's pages (ApiConfig::console)
// The table is `route_specs` (routes.hpp); docs/openapi.yaml documents it.
// Every error is `{"error": "<kind>", "message": "...", "request_id": "..."}`
// with the status of its kind (`http_status`); every response carries
// `X-Request-Id`, and a 5xx answer says only what kind of failure it was: the
// cause (database text included) is logged under that request id.
//
// Limits, each enforced while the request is read (a request over one is
// answered and its connection closed; nothing is buffered past it):
//   request line + headers > max_header_bytes       431
//   request target > max_target_bytes               414
//   body > max_body_bytes (Content-Length or chunked) 413
//   JSON body nested deeper than max_json_depth     400
//   request not complete within read_timeout        connection closed
//   of its first byte (keep_alive_timeout for that first byte, on a new
//   connection as on a kept-alive one)
//   more than max_connections open: the longest-waiting connection that is
//   not being served is closed to make room (503 when all are being served).
// Access: a Host header outside allowed_hosts → 421; with a token set, every
// route but /healthz (and /metrics unless metrics_require_token) needs
// `Authorization: Bearer <token>` → 401; a POST without
// `Content-Type: application/json` → 415; a known path under another method
// → 405. /healthz and /metrics are served by their own thread, so they answer
// while every request thread is busy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/metrics/prometheus.hpp>

namespace harvest::api {

/// Counter of requests served, labelled by route name (e.g. "start", "unrouted")
/// and status code: both bounded.
inline constexpr const char* kApiRequests = "harvest.api.requests";

/// One connector binding of the running process as GET {prefix}/connectors
/// shows it. The API does not link the connector runtime: the composition
/// root (HarvestPlugin) fills these from its runtimes through
/// ApiConfig::bindings.
struct BindingOverview {
  std::string binding;                      ///< the binding's name
  std::string kind;                         ///< "start" or "signal"
  std::string stream;                       ///< the topic or queue consumed
  std::string workflow;                     ///< the workflow started or signalled
  std::string subscription;                 ///< the source's subscription identity
  bool running = false;                     ///< its consumer thread is running
  std::optional<int64_t> lag;               ///< messages owed at the last sample; unset: unknown
  size_t in_flight = 0;                     ///< held for dispatch until the store answers
  std::optional<std::string> last_pass_at;  ///< ISO 8601, UTC; unset before the first pass
  uint64_t stalls = 0;                      ///< passes that found a partition stalled
  uint64_t rebuilds = 0;                    ///< consumer rebuilds after a stall
  bool store_available = true;              ///< false while intake waits for the store
  uint64_t dispatched = 0;                  ///< messages acked after a durable commit
  uint64_t dead_lettered = 0;               ///< messages recorded as poison
  uint64_t retried = 0;                     ///< messages left for redelivery
  uint64_t collisions = 0;                  ///< coordinate collisions met
  /// Set while the binding holds on a coordinate collision: what happened
  /// and what to do.
  std::optional<std::string> collision_hold;
};

/// Settings of the HTTP API: where it listens, its limits, timeouts and
/// access rules. Checked by `HttpServer::start()`; a config error names the field.
struct ApiConfig {
  /// Address to listen on. Default 127.0.0.1 (loopback only). A non-loopback
  /// address needs `token` (or allow_unauthenticated_remote).
  std::string host = "127.0.0.1";
  /// TCP port; 0 picks a free one (see `HttpServer::port()`). Default 8080.
  int port = 8080;
  /// Prefix of the API routes: empty, or starting with '/' and not ending with
  /// one. /healthz and /metrics are always at the root. Default /api/harvest.
  std::string prefix = "/api/harvest";
  /// Largest request body accepted, in bytes, chunked or not. Default 1 MiB.
  size_t max_body_bytes = 1 << 20;
  /// Largest request line plus headers, in bytes. Default 16 KiB.
  size_t max_header_bytes = 16 << 10;
  /// Longest request target (path and query), in bytes. Default 8 KiB.
  size_t max_target_bytes = 8 << 10;
  /// Deepest JSON nesting accepted in a body. Default 128.
  size_t max_json_depth = 128;
  /// Threads running API handlers (one request each at a time). Default 8.
  size_t threads = 8;
  /// Connections open at once. Default 1024. start() raises the process's
  /// soft RLIMIT_NOFILE towards this plus 256 (up to the hard limit) and
  /// warns when it stays below; out of descriptors, an idle connection is
  /// closed to accept a new one.
  size_t max_connections = 1024;
  /// A kept-alive connection must send its next complete request within this
  /// long, or it is closed. Default 5 s.
  std::chrono::seconds keep_alive_timeout{5};
  /// Requests served on one connection before it is closed. Default 1000.
  size_t keep_alive_max_requests = 1000;
  /// A new connection must send a first byte within keep_alive_timeout and
  /// its complete request (headers and body) within read_timeout of that
  /// byte; a response must be written within write_timeout. Defaults 10 s
  /// and 10 s.
  std::chrono::seconds read_timeout{10};
  std::chrono::seconds write_timeout{10};  ///< see read_timeout; must be positive
  /// Bearer token every route but /healthz (and /metrics, see below) requires;
  /// empty: no authentication (only allowed on a loopback `host`).
  std::string token;
  /// Whether /metrics needs the token too. Default false (scrapers commonly
  /// reach it without credentials; it holds no payloads).
  bool metrics_require_token = false;
  /// Serve a non-loopback `host` without a token. Default false: start()
  /// refuses, since anyone reaching the port could start and signal runs.
  bool allow_unauthenticated_remote = false;
  /// Host header values served (names or addresses, port ignored; "*" any).
  /// Empty (default): the loopback names, plus `host` when it is a specific
  /// address. Others are answered 421.
  std::vector<std::string> allowed_hosts;
  /// Serve the web console under /ui (its assets are built into the binary;
  /// docs/console.md). Default true. The pages need no token to load; every
  /// call they make is an API call and needs it like any other.
  bool console = true;
  /// A link from a run's trace id to a trace viewer, with `{trace_id}` where
  /// the id goes, e.g. "http://jaeger:16686/trace/{trace_id}"; must start
  /// with http:// or https://. Empty (default): no link.
  std::string trace_url_template;
  /// The connector bindings GET {prefix}/connectors lists; called on a
  /// request thread. Set by HarvestPlugin; unset: the list is empty.
  std::function<std::vector<BindingOverview>()> bindings;
  /// How often each binding's lag is sampled for the overview's last-hour
  /// chart (GET {prefix}/overview/history). Default 15 s; 1 s to 10 min.
  std::chrono::milliseconds lag_sample_interval = std::chrono::seconds(15);
  /// The exporter /metrics renders. Default: the engine's recorder when it is
  /// a PrometheusMetrics; otherwise /metrics answers 404. Shared with the
  /// engine, which records into it.
  std::shared_ptr<metrics::PrometheusMetrics> metrics;
};

/// `base` with the settings of the environment applied:
///   HARVEST_HTTP_HOST, HARVEST_HTTP_PORT        host, port
///   HARVEST_API_TOKEN, HARVEST_API_TOKEN_FILE   token (a file's content, trimmed)
///   HARVEST_API_ALLOWED_HOSTS                   comma-separated allowed_hosts
///   HARVEST_API_METRICS_REQUIRE_TOKEN=1         metrics_require_token
/// A config error names the variable that is wrong (never the token).
[[nodiscard]] Result<ApiConfig> api_config_from_env(ApiConfig base = {});

/// Lifecycle: construct, `start()` (binds, then serves on threads this object
/// owns), `stop()` (or the destructor) closes the listener, lets requests in
/// progress finish and joins every thread. Not restartable. `start`/`stop` are
/// called from one owning thread; `port()` from any. Keeps a reference to
/// `engine`, which must outlive the server.
class HttpServer {
 public:
  /// Keeps a reference to `engine` and its own copy of `config`; neither
  /// validates nor binds (start() does).
  HttpServer(engine::Engine& engine, ApiConfig config = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Validates the config (a config error names the field), binds host:port
  /// (a config error naming the address when it cannot) and starts serving.
  /// Returns once the server accepts connections.
  [[nodiscard]] Status start();
  /// Stops accepting, finishes requests in progress, joins the threads.
  /// Idempotent.
  void stop();

  /// The bound port (useful with port 0); 0 before `start()` succeeded.
  [[nodiscard]] int port() const;
  /// The config as given to the constructor (defaults such as allowed_hosts
  /// and metrics are resolved internally, not written back).
  [[nodiscard]] const ApiConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harvest::api
