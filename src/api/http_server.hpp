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
//   GET  /healthz, GET /metrics                                 (not under the prefix)
// Every error is `{"error": "<kind>", "message": "..."}` with the status of
// its kind (`http_status`), 413 for a body over `max_body_bytes` and 404 for
// an unknown route. Path segments cannot contain '/' (even percent-encoded).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "metrics/prometheus.hpp"

namespace harvest::api {

// Counter of requests served, labelled by route name (e.g. "start", "unrouted")
// and status code: both bounded.
inline constexpr const char* kApiRequests = "harvest.api.requests";

struct ApiConfig {
  // Address to listen on. Default 127.0.0.1 (loopback only).
  std::string host = "127.0.0.1";
  // TCP port; 0 picks a free one (see `HttpServer::port()`). Default 8080.
  int port = 8080;
  // Prefix of the API routes: empty, or starting with '/' and not ending with
  // one. /healthz and /metrics are always at the root. Default /api/harvest.
  std::string prefix = "/api/harvest";
  // Largest request body accepted, in bytes; a larger one is answered 413
  // without reaching the engine. Default 1 MiB.
  size_t max_body_bytes = 1 << 20;
  // Threads serving connections; a keep-alive connection holds one thread
  // while open, further connections wait for a free one. Default 8.
  size_t threads = 8;
  // An idle keep-alive connection is closed after this long. Default 5 s.
  std::chrono::seconds keep_alive_timeout{5};
  // Requests served on one connection before it is closed. Default 1000.
  size_t keep_alive_max_requests = 1000;
  // Socket read/write timeouts for a request in progress. Default 5 s each.
  std::chrono::seconds read_timeout{5};
  std::chrono::seconds write_timeout{5};
  // The exporter /metrics renders. Default: the engine's recorder when it is
  // a PrometheusMetrics; otherwise /metrics answers 404. Shared with the
  // engine, which records into it.
  std::shared_ptr<metrics::PrometheusMetrics> metrics;
};

// Lifecycle: construct, `start()` (binds, then serves on threads this object
// owns), `stop()` (or the destructor) closes the listener, lets requests in
// progress finish and joins every thread. Not restartable. `start`/`stop` are
// called from one owning thread; `port()` from any. Keeps a reference to
// `engine`, which must outlive the server.
class HttpServer {
 public:
  HttpServer(engine::Engine& engine, ApiConfig config = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Validates the config (a config error names the field), binds host:port
  // (a config error naming the address when it cannot) and starts serving.
  // Returns once the server accepts connections.
  [[nodiscard]] Status start();
  // Stops accepting, finishes requests in progress, joins the threads.
  // Idempotent.
  void stop();

  // The bound port (useful with port 0); 0 before `start()` succeeded.
  [[nodiscard]] int port() const;
  [[nodiscard]] const ApiConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harvest::api
