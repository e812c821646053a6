#include <fmt/format.h>

#include <atomic>

#include <harvest/api/http_server.hpp>
// GCC's -Wtsan reports every std::atomic_thread_fence under ThreadSanitizer,
// which does not model fences; Boost.Asio uses them in its headers. Silenced
// for the Boost headers alone, so the tsan preset still builds harvest's own
// code with warnings as errors.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop
#include <cstdlib>
#include <future>
#include <list>
#include <map>
#include <random>
#include <thread>

#include <harvest/api/config_check.hpp>
#include <harvest/api/console_assets.hpp>
#include <harvest/api/fd_limit.hpp>
#include <harvest/api/guard.hpp>
#include <harvest/api/handlers.hpp>
#include <harvest/api/router.hpp>
#include <harvest/api/routes.hpp>
#include <harvest/common/log.hpp>
#include <harvest/common/redact.hpp>

namespace harvest::api {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

using Handler = ApiResponse (Handlers::*)(const ApiRequest&);

struct Route {
  RoutePattern pattern;
  std::string name;  // label of the request counter
  Handler fn;
  bool control;  // served by the control thread (health, metrics)
};

// Short, unique within the process, unguessable across processes.
std::string new_request_id() {
  static const uint32_t prefix = std::random_device{}();
  static std::atomic<uint32_t> counter{0};
  return fmt::format("{:08x}{:08x}", prefix, counter.fetch_add(1));
}

bool is_disconnect(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == http::error::partial_message;
}

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

std::string_view path_of(beast::string_view target) {
  return sv(target).substr(0, sv(target).find('?'));
}

Method method_of(http::verb v) {
  if (v == http::verb::get) return Method::kGet;
  if (v == http::verb::post) return Method::kPost;
  return Method::kOther;
}

class Connection;

// Everything the server shares with its connections. Every member but the
// pools and `stopping` is used on the I/O thread only.
struct ServerCore {
  ServerCore(engine::Engine& e, ApiConfig c)
      : engine(e),
        config(std::move(c)),
        handlers(
            e, config.prefix,
            config.metrics
                ? config.metrics
                : std::dynamic_pointer_cast<metrics::PrometheusMetrics>(e.config().metrics),
            JsonLimits{.max_depth = config.max_json_depth, .max_bytes = config.max_body_bytes}),
        allowed_hosts(config.allowed_hosts.empty() ? default_allowed_hosts(config.host)
                                                   : config.allowed_hosts),
        request_pool(config.threads),
        control_pool(1) {
    handlers.set_console_sources(config.bindings, config.trace_url_template,
                                 config.lag_sample_interval);
    add_routes();
  }

  // The table comes from route_specs (routes.hpp), the one list the OpenAPI
  // document is checked against; each spec's name picks its handler.
  void add_routes() {
    static const std::map<std::string, Handler, std::less<>> kHandlers = {
        {"start", &Handlers::start},
        {"signal_with_start", &Handlers::signal_with_start},
        {"signal_execution", &Handlers::signal_execution},
        {"signal_workflow", &Handlers::signal_workflow},
        {"cancel_execution", &Handlers::cancel_execution},
        {"terminate_execution", &Handlers::terminate_execution},
        {"cancel_executions", &Handlers::cancel_executions},
        {"terminate_executions", &Handlers::terminate_executions},
        {"get_execution", &Handlers::get_execution},
        {"list_executions", &Handlers::list_executions},
        {"overview", &Handlers::overview},
        {"overview_history", &Handlers::overview_history},
        {"connectors", &Handlers::connectors},
        {"list_dead_letters", &Handlers::list_dead_letters},
        {"replay_dead_letter", &Handlers::replay_dead_letter},
        {"list_connector_dead_letters", &Handlers::list_connector_dead_letters},
        {"get_connector_dead_letter", &Handlers::get_connector_dead_letter},
        {"replay_connector_dead_letters", &Handlers::replay_connector_dead_letters},
        {"purge_connector_dead_letters", &Handlers::purge_connector_dead_letters},
        {"healthz", &Handlers::health},
        {"metrics", &Handlers::metrics},
    };
    for (auto& spec : route_specs(config.prefix)) {
      auto fn = kHandlers.find(spec.name);
      if (fn == kHandlers.end()) {
        // A broken invariant of this file, never reachable from input.
        log::error("HTTP API route '{}' has no handler", spec.name);
        std::abort();
      }
      routes.push_back(Route{route_pattern(spec), std::move(spec.name), fn->second, spec.control});
      patterns.push_back(routes.back().pattern);
    }
  }

  void count(std::string_view route, int status) {
    engine.metrics().increment(kApiRequests,
                               {{"route", std::string(route)}, {"status", std::to_string(status)}});
  }

  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  // Closes the longest-waiting connection not being served; false if none.
  bool make_room();

  engine::Engine& engine;
  const ApiConfig config;
  Handlers handlers;
  const std::vector<std::string> allowed_hosts;
  std::vector<Route> routes;
  std::vector<RoutePattern> patterns;
  std::atomic<int> port{0};
  std::atomic<bool> stopping{false};
  bool started = false;

  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  // After the I/O objects: connections (which hold sockets of `ioc`) go first.
  std::list<std::shared_ptr<Connection>> connections;
  net::thread_pool request_pool;
  net::thread_pool control_pool;
  std::thread io_thread;
};

// One client connection: reads one request at a time within its deadlines
// and limits, runs it on a pool, writes the answer, and waits for the next.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerCore& server, tcp::socket socket)
      : s_(server), stream_(std::move(socket)), body_timer_(stream_.get_executor()) {}

  std::list<std::shared_ptr<Connection>>::iterator slot;

  [[nodiscard]] bool serving() const { return serving_; }

  void start(bool over_capacity) {
    if (over_capacity) {
      serving_ = true;
      return reply(error_response(503, "unavailable",
                                  fmt::format("the server has {} connections open, its limit; "
                                              "retry shortly",
                                              s_.config.max_connections)),
                   new_request_id(), "unrouted", false);
    }
    // Until its first byte a new connection is an idle one, held no longer
    // than a kept-alive connection between requests: a client that connects
    // and sends nothing gives its descriptor back after keep_alive_timeout.
    await_next_request();
  }

  // Closes the socket (pending operations complete as aborted) and leaves
  // the server's list. Idempotent.
  void close() {
    if (closed_) return;
    closed_ = true;
    body_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both,
                              ec);  // NOLINT(bugprone-unused-return-value)
    stream_.close();
    s_.connections.erase(slot);  // last: may release this object's list reference
  }

  // Lets the connection close after the answer in progress (server stop).
  void close_when_idle() {
    if (!serving_) close();
  }

 private:
  // A kept-alive connection first waits (keep_alive_timeout) for a byte of
  // its next request; the request itself then has read_timeout.
  void await_next_request() {
    if (buffer_.size() > 0) return read_request();
    stream_.expires_after(s_.config.keep_alive_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  void read_request() {
    head_ = false;
    read_deadline_ = std::chrono::steady_clock::now() + s_.config.read_timeout;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<size_t>(s_.config.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->body_limit(static_cast<std::uint64_t>(s_.config.max_body_bytes));
    stream_.expires_after(s_.config.read_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // Answers a request that broke a limit or the protocol, then closes.
  void refuse(int status, std::string_view kind, std::string message) {
    serving_ = true;
    reply(error_response(status, kind, std::move(message)), new_request_id(), "unrouted", false);
  }

  bool refuse_read_error(const beast::error_code& ec) {
    if (!ec) return false;
    if (closed_ || is_disconnect(ec)) {
      close();
    } else if (ec == http::error::header_limit) {
      refuse(431, "headers_too_large",
             fmt::format("the request line and headers exceed the limit of {} bytes",
                         s_.config.max_header_bytes));
    } else if (ec == http::error::body_limit) {
      refuse(413, "payload_too_large",
             fmt::format("request body exceeds the limit of {} bytes", s_.config.max_body_bytes));
    } else {
      refuse(400, "bad_request", fmt::format("malformed HTTP request: {}", ec.message()));
    }
    return true;
  }

  void on_header(beast::error_code ec) {
    if (refuse_read_error(ec)) return;
    auto& req = parser_->get();
    if (req.target().size() > s_.config.max_target_bytes) {
      return refuse(414, "uri_too_long",
                    fmt::format("the request target exceeds the limit of {} bytes",
                                s_.config.max_target_bytes));
    }
    if (parser_->is_done()) return serve();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      continue_ = http::response<http::empty_body>{http::status::continue_, req.version()};
      return http::async_write(stream_, continue_,
                               [self = shared_from_this()](beast::error_code wec, size_t) {
                                 if (wec) return self->close();
                                 self->read_body();
                               });
    }
    read_body();
  }

  // The body gets what is left of read_timeout. Past it the client hears a
  // 408 before the connection closes: the stream's own expiry would close the
  // socket without a word, so a timer of ours cancels the read instead.
  void read_body() {
    stream_.expires_never();
    body_timed_out_ = false;
    body_timer_.expires_at(read_deadline_);
    body_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;  // cancelled: the body arrived (or the connection went)
      self->body_timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);  // NOLINT(bugprone-unused-return-value)
    });
    http::async_read(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          self->body_timer_.cancel();
          if (ec && self->body_timed_out_ && !self->closed_) {
            return self->refuse(408, "request_timeout",
                                fmt::format("the request body did not arrive within the read "
                                            "timeout ({} s)",
                                            self->s_.config.read_timeout.count()));
          }
          if (self->refuse_read_error(ec)) return;
          self->serve();
        });
  }

  // Applies the access checks, then runs the route's handler on its pool.
  void serve() {
    serving_ = true;
    auto& req = parser_->get();
    const std::string rid = new_request_id();
    const bool keep_alive =
        req.keep_alive() && served_ + 1 < s_.config.keep_alive_max_requests && !s_.stopping.load();
    const std::string_view host = sv(req[http::field::host]);
    if (host.empty() && req.version() >= 11) {
      return reply(error_response(400, "bad_request", "an HTTP/1.1 request needs a Host header"),
                   rid, "unrouted", false);
    }
    if (!host.empty() && !host_allowed(host, s_.allowed_hosts)) {
      return reply(error_response(421, "misdirected_request",
                                  "this server does not answer for the host named in the Host "
                                  "header (ApiConfig::allowed_hosts)"),
                   rid, "unrouted", false);
    }
    // HEAD is answered as GET without the body (RFC 9110 9.3.2).
    head_ = req.method() == http::verb::head;
    // The console's pages: static, public (they hold no data; every call
    // they make is an API call and needs the token like any other).
    if (s_.config.console) {
      const bool read = req.method() == http::verb::get || req.method() == http::verb::head;
      if (auto page = console_response(path_of(req.target()), read, s_.config.prefix); page) {
        return reply(std::move(*page), rid, "console", keep_alive);
      }
    }
    auto target = parse_target(sv(req.target()));
    if (!target) return reply(error_response(target.error()), rid, "unrouted", false);
    const Method method = head_ ? Method::kGet : method_of(req.method());
    const bool is_health = target->segments == std::vector<std::string>{"healthz"};
    const bool is_metrics = target->segments == std::vector<std::string>{"metrics"};
    const bool needs_token =
        !s_.config.token.empty() && !is_health && !(is_metrics && !s_.config.metrics_require_token);
    if (needs_token && !bearer_matches(sv(req[http::field::authorization]), s_.config.token)) {
      auto r = error_response(401, "unauthorized",
                              "this route needs an 'Authorization: Bearer <token>' header with "
                              "the server's API token");
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"harvest\"");
      return reply(std::move(r), rid, "unrouted", keep_alive);
    }
    auto match = match_route(s_.patterns, method, target->segments);
    if (!match.route) {
      if (match.path_known) {
        auto r = error_response(
            405, "method_not_allowed",
            fmt::format("{} is not allowed on {}", sv(req.method_string()), path_of(req.target())));
        return reply(std::move(r), rid, "unrouted", keep_alive);
      }
      return reply(error_response(404, "not_found",
                                  fmt::format("no route for {} {}", sv(req.method_string()),
                                              path_of(req.target()))),
                   rid, "unrouted", keep_alive);
    }
    if (method == Method::kPost && !is_json_content_type(sv(req[http::field::content_type]))) {
      return reply(error_response(415, "unsupported_media_type",
                                  "send the request with 'Content-Type: application/json'"),
                   rid, "unrouted", keep_alive);
    }
    const Route& route = s_.routes[*match.route];
    ApiRequest areq{.params = std::move(match.captures),
                    .query = std::move(target->query),
                    .body = std::move(req.body()),
                    .idempotency_key_headers = {}};
    for (auto [it, end] = req.equal_range("Idempotency-Key"); it != end; ++it) {
      areq.idempotency_key_headers.emplace_back(sv(it->value()));
    }
    if (s_.stopping) {
      return reply(error_response(503, "unavailable", "the server is stopping"), rid, "unrouted",
                   false);
    }
    auto& pool = route.control ? s_.control_pool : s_.request_pool;
    net::post(pool, [self = shared_from_this(), areq = std::move(areq), rid, &route,
                     keep_alive]() mutable {
      ApiResponse r;
      try {  // no exception may escape onto a pool thread
        r = (self->s_.handlers.*route.fn)(areq);
      } catch (const std::exception& e) {
        r = error_response(Error::internal(fmt::format("unexpected failure: {}", e.what())));
      }
      net::post(self->stream_.get_executor(),
                [self, r = std::move(r), rid = std::move(rid), &route, keep_alive]() mutable {
                  self->reply(std::move(r), rid, route.name, keep_alive);
                });
    });
  }

  void reply(ApiResponse r, const std::string& rid, const std::string& route, bool keep_alive) {
    if (closed_) return;
    if (!r.log_detail.empty()) {
      log::warn("HTTP API answered {} on {} [request {}]: {}", r.status, route, rid,
                redact_secrets(r.log_detail));
    }
    if (r.status >= 400 && r.content_type == "application/json") {
      auto j = Json::parse(r.body, nullptr, false);  // our own error body
      if (j.is_object()) {
        j["request_id"] = rid;
        r.body = dump(j);
      }
    }
    s_.count(route, r.status);
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    response_.set("X-Request-Id", rid);
    // No answer is a document another site may frame or a browser may sniff
    // into something else; the console's pages set their own policy.
    response_.set("X-Content-Type-Options", "nosniff");
    response_.set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    for (const auto& [k, v] : r.headers) response_.set(k, v);
    response_.keep_alive(keep_alive);
    response_.body() = std::move(r.body);
    response_.prepare_payload();
    // A HEAD answer keeps the Content-Length the GET would have had.
    if (head_) response_.body().clear();
    stream_.expires_after(s_.config.write_timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        self->serving_ = false;
                        ++self->served_;
                        if (ec || !keep_alive || self->s_.stopping) return self->close();
                        self->await_next_request();
                      });
  }

  ServerCore& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer body_timer_;  // read_timeout for the body phase (a 408, not a silent close)
  std::chrono::steady_clock::time_point read_deadline_;
  bool body_timed_out_ = false;
  bool head_ = false;  // the request being answered is a HEAD
  http::response<http::empty_body> continue_;
  http::response<http::string_body> response_;
  size_t served_ = 0;
  bool serving_ = false;
  bool closed_ = false;
};

void ServerCore::accept() {
  acceptor.async_accept(
      ioc, [this](beast::error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void ServerCore::on_accept(beast::error_code ec, tcp::socket socket) {
  if (!acceptor.is_open() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors: an idle connection gives its own up and the next
    // one in the backlog is accepted at once, as at max_connections.
    if ((ec == net::error::no_descriptors ||
         ec == boost::system::errc::too_many_files_open_in_system) &&
        make_room()) {
      return accept();
    }
    // Nothing to free, or a transient network error: try again shortly
    // rather than spin (the pending connections wait in the backlog).
    log::warn("HTTP API could not accept a connection: {}; retrying in 100 ms", ec.message());
    accept_retry.expires_after(std::chrono::milliseconds(100));
    accept_retry.async_wait([this](beast::error_code wec) {
      if (!wec) accept();
    });
    return;
  }
  beast::error_code opt;
  socket.set_option(tcp::no_delay(true), opt);  // NOLINT(bugprone-unused-return-value)
  const bool over = connections.size() >= config.max_connections && !make_room();
  auto c = std::make_shared<Connection>(*this, std::move(socket));
  connections.push_back(c);
  c->slot = std::prev(connections.end());
  c->start(over);
  accept();
}

bool ServerCore::make_room() {
  for (auto& c : connections) {
    if (c->serving()) continue;
    auto victim = c;  // keeps it alive while it leaves the list
    victim->close();
    return true;
  }
  return false;
}

}  // namespace

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(engine::Engine& engine, ApiConfig config)
    : impl_(std::make_unique<Impl>(engine, std::move(config))) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  Impl& s = *impl_;
  if (s.started) return fail(Error::config("HttpServer::start called twice"));
  if (auto ok = validate_api_config(s.config); !ok) return ok;
  s.started = true;

  beast::error_code ec;
  tcp::resolver resolver(s.ioc);
  auto endpoints = resolver.resolve(s.config.host, std::to_string(s.config.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  auto cannot_listen = [&](const beast::error_code& why) {
    return fail(Error::config(fmt::format("cannot listen on {}:{} (ApiConfig::host/port): {}",
                                          s.config.host, s.config.port, why.message())));
  };
  if (ec || endpoints.empty()) return cannot_listen(ec);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  // SO_REUSEADDR allows a quick restart over connections in TIME_WAIT; no
  // SO_REUSEPORT, so a port already in use fails here instead of silently
  // sharing its traffic with another server.
  if (s.acceptor.open(endpoint.protocol(), ec); ec) return cannot_listen(ec);
  if (s.acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return cannot_listen(ec);
  }
  if (s.acceptor.bind(endpoint, ec); ec) return cannot_listen(ec);
  if (s.acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return cannot_listen(ec);
  }
  s.port = s.acceptor.local_endpoint().port();
  ensure_descriptors(s.config.max_connections);
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  s.io_thread = std::thread([&s] { s.ioc.run(); });
  log::info("HTTP API listening on http://{}:{}{}{}", s.config.host, s.port.load(), s.config.prefix,
            s.config.token.empty() ? "" : " (bearer token required)");
  return {};
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.io_thread.joinable()) return;
  // Stop accepting and close idle connections, on the I/O thread; requests
  // being served finish, their answers are written, then their connections
  // close.
  s.stopping = true;
  std::promise<void> closed;
  net::post(s.ioc, [&s, &closed] {
    beast::error_code ec;
    s.acceptor.close(ec);  // NOLINT(bugprone-unused-return-value)
    s.accept_retry.cancel();
    auto open = s.connections;  // close() edits the list
    for (auto& c : open) c->close_when_idle();
    closed.set_value();
  });
  closed.get_future().wait();
  s.request_pool.join();
  s.control_pool.join();
  s.work.reset();  // run() returns once the last answers are written
  s.io_thread.join();
}

int HttpServer::port() const {
  return impl_->port.load();
}

const ApiConfig& HttpServer::config() const {
  return impl_->config;
}

}  // namespace harvest::api
