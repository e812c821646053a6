#include "api/http_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "api/handlers.hpp"
#include "common/log.hpp"

namespace harvest::api {

namespace {

using Route = ApiResponse (Handlers::*)(const ApiRequest&);

std::string regex_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Status validate(const ApiConfig& c) {
  if (!c.prefix.empty() && (c.prefix.front() != '/' || c.prefix.back() == '/')) {
    return fail(Error::config(fmt::format(
        "ApiConfig::prefix '{}' must be empty or start with '/' and not end with '/' (e.g. "
        "/api/harvest)",
        c.prefix)));
  }
  if (c.prefix.find_first_of(" \t\r\n?#") != std::string::npos) {
    return fail(Error::config(
        fmt::format("ApiConfig::prefix '{}' must not contain spaces, '?' or '#'", c.prefix)));
  }
  if (c.port < 0 || c.port > 65535) {
    return fail(Error::config(fmt::format("ApiConfig::port {} is not a TCP port", c.port)));
  }
  if (c.threads == 0) return fail(Error::config("ApiConfig::threads must be at least 1"));
  if (c.max_body_bytes == 0) return fail(Error::config("ApiConfig::max_body_bytes must be > 0"));
  if (c.keep_alive_max_requests == 0) {
    return fail(Error::config("ApiConfig::keep_alive_max_requests must be at least 1"));
  }
  return {};
}

void write(const ApiResponse& r, httplib::Response& res) {
  res.status = r.status;
  for (const auto& [k, v] : r.headers) res.set_header(k, v);
  res.set_content(r.body, r.content_type);
}

}  // namespace

struct HttpServer::Impl {
  Impl(engine::Engine& e, ApiConfig c)
      : engine(e),
        config(std::move(c)),
        handlers(e, config.prefix,
                 config.metrics
                     ? config.metrics
                     : std::dynamic_pointer_cast<metrics::PrometheusMetrics>(e.config().metrics)) {}

  void count(std::string_view route, int status) {
    engine.metrics().increment(kApiRequests,
                               {{"route", std::string(route)}, {"status", std::to_string(status)}});
  }

  // Registers `fn` for `method` on `pattern` (a regex whose groups are the
  // path captures), named `name` in the request counter.
  void add(const char* method, const std::string& pattern, std::string name, Route fn) {
    auto handler = [this, name = std::move(name), fn](const httplib::Request& req,
                                                      httplib::Response& res) {
      ApiRequest areq;
      for (size_t i = 1; i < req.matches.size(); ++i) areq.params.push_back(req.matches[i].str());
      for (const auto& [k, v] : req.params) areq.query.emplace(k, v);
      areq.body = req.body;
      for (size_t i = 0, n = req.get_header_value_count("Idempotency-Key"); i < n; ++i) {
        areq.idempotency_key_headers.push_back(req.get_header_value("Idempotency-Key", i));
      }
      ApiResponse r;
      // No exception may escape onto httplib's pool thread.
      try {
        r = (handlers.*fn)(areq);
      } catch (const std::exception& e) {
        r = error_response(500, to_string(ErrorKind::kInternal),
                           fmt::format("unexpected failure serving {}: {}", name, e.what()));
      }
      write(r, res);
      count(name, r.status);
    };
    if (std::string_view(method) == "GET") {
      server.Get(pattern, handler);
    } else {
      server.Post(pattern, handler);
    }
  }

  void add_routes() {
    const std::string p = regex_escape(config.prefix);
    const std::string seg = "([^/]+)";
    add("POST", p + "/workflows/" + seg + "/start", "start", &Handlers::start);
    add("POST", p + "/workflows/" + seg + "/signal-with-start", "signal_with_start",
        &Handlers::signal_with_start);
    add("POST", p + "/executions/" + seg + "/signals/" + seg, "signal_execution",
        &Handlers::signal_execution);
    add("POST", p + "/workflows/" + seg + "/executions/" + seg + "/signals/" + seg,
        "signal_workflow", &Handlers::signal_workflow);
    add("GET", p + "/executions/" + seg, "get_execution", &Handlers::get_execution);
    add("GET", p + "/executions", "list_executions", &Handlers::list_executions);
    add("GET", p + "/dead-letters", "list_dead_letters", &Handlers::list_dead_letters);
    add("POST", p + "/dead-letters/" + seg + "/replay", "replay_dead_letter",
        &Handlers::replay_dead_letter);
    add("GET", "/healthz", "healthz", &Handlers::health);
    add("GET", "/metrics", "metrics", &Handlers::metrics);

    // Every error response passes through here. Ours already carry a JSON
    // body; the ones httplib produces itself (no route, body too large,
    // unparsable request) get one in the same shape.
    server.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          ApiResponse r;
          switch (res.status) {
            case 404:
              r = error_response(404, "not_found",
                                 fmt::format("no route for {} {}", req.method, req.path));
              break;
            case 413:
              r = error_response(
                  413, "payload_too_large",
                  fmt::format("request body exceeds the limit of {} bytes", config.max_body_bytes));
              break;
            default:
              r = error_response(
                  res.status, "bad_request",
                  fmt::format("the HTTP request could not be processed (HTTP {})", res.status));
              break;
          }
          write(r, res);
          count("unrouted", r.status);
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler(
        [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown exception";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          write(error_response(500, to_string(ErrorKind::kInternal),
                               fmt::format("unexpected failure serving {}: {}", req.path, what)),
                res);
          count("unrouted", 500);
        });
  }

  engine::Engine& engine;
  const ApiConfig config;
  Handlers handlers;
  httplib::Server server;
  std::atomic<int> port{0};
  std::atomic<bool> listen_returned{false};
  bool started = false;
  std::jthread thread;
};

HttpServer::HttpServer(engine::Engine& engine, ApiConfig config)
    : impl_(std::make_unique<Impl>(engine, std::move(config))) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  Impl& s = *impl_;
  if (s.started) return fail(Error::config("HttpServer::start called twice"));
  if (auto ok = validate(s.config); !ok) return ok;
  s.started = true;

  const size_t threads = s.config.threads;
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.server.set_payload_max_length(s.config.max_body_bytes);
  s.server.set_keep_alive_timeout(s.config.keep_alive_timeout.count());
  s.server.set_keep_alive_max_count(s.config.keep_alive_max_requests);
  s.server.set_read_timeout(s.config.read_timeout.count());
  s.server.set_write_timeout(s.config.write_timeout.count());
  s.server.set_tcp_nodelay(true);
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind
  // a port already in use and silently share its traffic; a busy port must
  // fail start() instead. SO_REUSEADDR alone still allows a quick restart
  // over connections in TIME_WAIT.
  s.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // best effort
  });
  s.add_routes();

  int port = s.config.port == 0
                 ? s.server.bind_to_any_port(s.config.host)
                 : (s.server.bind_to_port(s.config.host, s.config.port) ? s.config.port : -1);
  if (port <= 0) {
    return fail(Error::config(fmt::format("cannot listen on {}:{} (ApiConfig::host/port): {}",
                                          s.config.host, s.config.port, std::strerror(errno))));
  }
  s.port = port;
  s.thread = std::jthread([&s] {
    if (!s.server.listen_after_bind()) {
      log::error("HTTP API on {}:{} stopped accepting connections", s.config.host, s.port.load());
    }
    s.listen_returned = true;
  });
  // httplib 0.11 has no readiness signal, and its stop() is a no-op until
  // the accept loop has started; wait (bounded) for the loop so that a stop()
  // right after start() cannot be lost and leave the thread serving forever.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!s.server.is_running() && !s.listen_returned) {
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(Error::internal("the HTTP API's accept loop did not start within 10 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s.server.is_running()) {
    return fail(Error::internal(
        fmt::format("the HTTP API on {}:{} stopped as soon as it started", s.config.host, port)));
  }
  log::info("HTTP API listening on http://{}:{}{}", s.config.host, port, s.config.prefix);
  return {};
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  s.server.stop();
  s.thread.join();
}

int HttpServer::port() const {
  return impl_->port.load();
}

const ApiConfig& HttpServer::config() const {
  return impl_->config;
}

}  // namespace harvest::api
