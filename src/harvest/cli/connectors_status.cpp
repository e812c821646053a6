#include <fmt/format.h>

#include <harvest/cli/connectors_status.hpp>

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
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include <harvest/cli/output.hpp>
#include <harvest/common/url.hpp>
#include <harvest/version.hpp>

namespace harvest::cli {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::unexpected<Error> bad(std::string m) {
  return fail(Error::invalid_input(std::move(m)));
}

// Series read, by exposition name (counters carry their _total suffix).
enum class Series {
  kLag,
  kInFlight,
  kLastPass,
  kStalls,
  kStore,
  kDispatched,
  kDead,
  kRetried,
  kCollisions,
  kHold
};

std::optional<Series> series_of(std::string_view name) {
  if (name == "harvest_connector_lag") return Series::kLag;
  if (name == "harvest_connector_in_flight") return Series::kInFlight;
  if (name == "harvest_connector_last_pass_timestamp_seconds") return Series::kLastPass;
  if (name == "harvest_connector_recoveries_total") return Series::kStalls;
  if (name == "harvest_connector_store_unavailable") return Series::kStore;
  if (name == "harvest_connector_dispatched_total") return Series::kDispatched;
  if (name == "harvest_connector_dead_lettered_total") return Series::kDead;
  if (name == "harvest_connector_retried_total") return Series::kRetried;
  if (name == "harvest_connector_coordinate_collisions_total") return Series::kCollisions;
  if (name == "harvest_connector_collision_hold") return Series::kHold;
  return std::nullopt;
}

// Parses `{a="x",b="y"}` from s[pos] ('{'); the value of label `source`.
Result<std::string> source_label(std::string_view s, size_t& pos) {
  std::string source;
  ++pos;  // '{'
  while (pos < s.size() && s[pos] != '}') {
    const size_t eq = s.find('=', pos);
    if (eq == std::string_view::npos || eq + 1 >= s.size() || s[eq + 1] != '"') {
      return bad("label without a quoted value");
    }
    std::string_view key = s.substr(pos, eq - pos);
    while (!key.empty() && (key.front() == ',' || key.front() == ' ')) key.remove_prefix(1);
    std::string value;
    size_t i = eq + 2;
    for (; i < s.size() && s[i] != '"'; ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
        value.push_back(s[i] == 'n' ? '\n' : s[i]);
      } else {
        value.push_back(s[i]);
      }
    }
    if (i >= s.size()) return bad("unterminated label value");
    if (key == "source") source = std::move(value);
    pos = i + 1;
    if (pos < s.size() && s[pos] == ',') ++pos;
  }
  if (pos >= s.size()) return bad("unterminated label set");
  ++pos;  // '}'
  return source;
}

Result<double> sample_value(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  const std::string_view token = s.substr(0, s.find(' '));
  if (token == "NaN") return 0.0;
  if (token == "+Inf") return std::numeric_limits<double>::infinity();
  if (token == "-Inf") return -std::numeric_limits<double>::infinity();
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc{} || end != token.data() + token.size() || token.empty()) {
    return bad("value is not a number");
  }
  return v;
}

void apply(BindingStatus& b, Series series, double v) {
  switch (series) {
    case Series::kLag:
      b.lag = v;
      break;
    case Series::kInFlight:
      b.in_flight = v;
      break;
    case Series::kLastPass:
      b.last_pass = v;
      break;
    case Series::kStalls:
      b.stalls += v;
      break;
    case Series::kStore:
      b.store_unavailable = b.store_unavailable || v >= 1;
      break;
    case Series::kDispatched:
      b.dispatched += v;
      break;
    case Series::kDead:
      b.dead_lettered += v;
      break;
    case Series::kRetried:
      b.retried += v;
      break;
    case Series::kCollisions:
      b.collisions += v;
      break;
    case Series::kHold:
      b.holding = b.holding || v >= 1;
      break;
  }
}

// What one metrics URL is read from: only plain http, and never with
// credentials in it (they belong in --token; the URL is echoed in errors).
struct MetricsUrl {
  std::string host, port, target;
};

Result<MetricsUrl> metrics_url(const std::string& url) {
  auto u = parse_url(url);
  if (!u) return fail(u.error());
  if (u->has_userinfo) {
    return bad("metrics URL carries credentials (user@host); pass --token instead");
  }
  if (u->scheme != "http") {
    return bad(fmt::format("metrics URL {} is not http:// (https is not supported here)", url));
  }
  return MetricsUrl{.host = u->host,
                    .port = u->port.empty() ? "80" : u->port,
                    .target = u->path_given ? u->target() : "/metrics"};
}

std::string number(double v) {
  return v == static_cast<double>(static_cast<long long>(v))
             ? std::to_string(static_cast<long long>(v))
             : fmt::format("{:.3f}", v);
}

}  // namespace

Result<std::map<std::string, BindingStatus>> parse_connector_status(const std::string& exposition) {
  std::map<std::string, BindingStatus> out;
  std::istringstream in(exposition);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line.front() == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) return bad(fmt::format("line {}: no value", n));
    const auto series = series_of(std::string_view(line).substr(0, name_end));
    if (!series) continue;
    size_t pos = name_end;
    std::string source;
    if (line[pos] == '{') {
      auto label = source_label(line, pos);
      if (!label) return bad(fmt::format("line {}: {}", n, label.error().message));
      source = std::move(*label);
    }
    auto v = sample_value(std::string_view(line).substr(pos));
    if (!v) return bad(fmt::format("line {}: {}", n, v.error().message));
    if (source.empty()) continue;
    BindingStatus& b = out[source];
    b.processes = 1;
    apply(b, *series, *v);
  }
  return out;
}

void merge_status(std::map<std::string, BindingStatus>& into,
                  const std::map<std::string, BindingStatus>& more) {
  for (const auto& [name, m] : more) {
    auto [it, fresh] = into.try_emplace(name, m);
    if (fresh) continue;
    BindingStatus& b = it->second;
    if (m.lag) b.lag = std::max(b.lag.value_or(0), *m.lag);
    if (m.last_pass) b.last_pass = std::max(b.last_pass.value_or(0), *m.last_pass);
    b.in_flight += m.in_flight;
    b.stalls += m.stalls;
    b.store_unavailable = b.store_unavailable || m.store_unavailable;
    b.dispatched += m.dispatched;
    b.dead_lettered += m.dead_lettered;
    b.retried += m.retried;
    b.collisions += m.collisions;
    b.holding = b.holding || m.holding;
    b.processes += m.processes;
  }
}

Result<std::string> http_get(const std::string& url, const std::string& token,
                             std::chrono::milliseconds timeout) {
  auto u = metrics_url(url);
  if (!u) return fail(u.error());
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, u->target, 11};
  req.set(http::field::host, u->host);
  req.set(http::field::user_agent, std::string("harvest-cli/") + HARVEST_VERSION);
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxExpositionBytes);
  asio::ip::tcp::resolver resolver(ioc);
  beast::error_code failure;
  stream.expires_after(timeout);
  resolver.async_resolve(u->host, u->port, [&](beast::error_code ec, auto endpoints) {
    if (ec) return void(failure = ec);
    stream.async_connect(endpoints, [&](beast::error_code ec2, auto) {
      if (ec2) return void(failure = ec2);
      http::async_write(stream, req, [&](beast::error_code ec3, size_t) {
        if (ec3) return void(failure = ec3);
        http::async_read(stream, buffer, parser, [&](beast::error_code ec4, size_t) {
          if (ec4) failure = ec4;
        });
      });
    });
  });
  ioc.run_for(timeout + std::chrono::milliseconds(100));
  if (!ioc.stopped()) {
    return fail(
        Error::transient_error(fmt::format("{}: no answer within {} ms", url, timeout.count())));
  }
  if (failure) {
    return fail(Error::transient_error(fmt::format("{}: {}", url, failure.message())));
  }
  const auto& res = parser.get();
  if (res.result_int() != 200) {
    return fail(Error::transient_error(fmt::format("{}: HTTP {}", url, res.result_int())));
  }
  return res.body();
}

void add_connectors_commands(CLI::App& app, ConnectorsOptions& o) {
  auto* connectors = app.add_subcommand("connectors", "connector bindings of running processes");
  connectors->require_subcommand(1);
  o.status = connectors->add_subcommand(
      "status", "lag, in flight, last pass and stalls of every binding, read from /metrics");
  o.status
      ->add_option("--metrics-url", o.metrics_urls,
                   "GET /metrics URL of a harvest process; repeat for replicas (default: "
                   "$HARVEST_METRICS_URL, then http://127.0.0.1:8080/metrics)")
      ->delimiter(',');
  o.status->add_option("--token", o.token,
                       "bearer token for a guarded /metrics (default: $HARVEST_API_TOKEN)");
  o.status->add_option("--timeout-ms", o.timeout_ms, "per-URL timeout")
      ->check(CLI::Range(100, 600000));
}

int run_connectors_status(const ConnectorsOptions& o, bool json, std::ostream& out,
                          std::ostream& err) {
  std::vector<std::string> urls = o.metrics_urls;
  if (urls.empty()) urls.push_back(env_or("HARVEST_METRICS_URL", "http://127.0.0.1:8080/metrics"));
  const std::string token = o.token.empty() ? env_or("HARVEST_API_TOKEN", "") : o.token;
  std::map<std::string, BindingStatus> all;
  std::vector<Error> failures;
  for (const auto& url : urls) {
    auto body = http_get(url, token, std::chrono::milliseconds(o.timeout_ms));
    if (!body) {
      failures.push_back(body.error());
      continue;
    }
    auto parsed = parse_connector_status(*body);
    if (!parsed) {
      failures.push_back(Error::invalid_input(fmt::format("{}: {}", url, parsed.error().message)));
      continue;
    }
    merge_status(all, *parsed);
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (json) {
    nlohmann::json bindings = nlohmann::json::array();
    for (const auto& [name, b] : all) {
      bindings.push_back({{"binding", name},
                          {"lag", b.lag ? nlohmann::json(*b.lag) : nlohmann::json(nullptr)},
                          {"in_flight", b.in_flight},
                          {"last_pass_unix", b.last_pass ? nlohmann::json(*b.last_pass) : nullptr},
                          {"stalls", b.stalls},
                          {"store_unavailable", b.store_unavailable},
                          {"dispatched", b.dispatched},
                          {"dead_lettered", b.dead_lettered},
                          {"retried", b.retried},
                          {"collisions", b.collisions},
                          {"holding_on_collision", b.holding},
                          {"processes", b.processes}});
    }
    out << nlohmann::json{{"bindings", bindings}}.dump() << "\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [name, b] : all) {
      rows.push_back(
          {name, b.lag ? number(*b.lag) : "-", number(b.in_flight),
           b.last_pass ? fmt::format("{:.0f}s ago", std::max(0.0, now - *b.last_pass)) : "-",
           number(b.stalls), b.store_unavailable ? "unavailable" : "ok", number(b.dispatched),
           number(b.dead_lettered), number(b.retried), number(b.collisions)});
    }
    if (rows.empty() && failures.empty()) out << "no connector bindings reported\n";
    if (!rows.empty()) {
      print_table(out,
                  {"BINDING", "LAG", "IN_FLIGHT", "LAST_PASS", "STALLS", "STORE", "DISPATCHED",
                   "DEAD_LETTERED", "RETRIED", "COLLISIONS"},
                  rows);
    }
    for (const auto& [name, b] : all) {
      if (!b.holding) continue;
      out << fmt::format(
          "binding '{}' HOLDS on a coordinate collision: it commits nothing past the colliding "
          "record and takes no new message. GET /connectors (or the log) names the record and "
          "the earlier run; give the binding a new key_incarnation and restart it\n",
          name);
    }
  }
  int rc = 0;
  for (const auto& f : failures) rc = fail_with(err, f);
  return rc;
}

}  // namespace harvest::cli
