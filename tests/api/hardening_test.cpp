// Hardening of the HTTP API: requests an attacker would send, over real
// HTTP against the test PostgreSQL. Each test asserts the exact answer and
// that the server is still alive and answering afterwards.
#include <gtest/gtest.h>

#include <regex>
#include <thread>
#include <vector>

#include "api_fixture.hpp"
#include "raw_http.hpp"
#include <harvest/api/handlers.hpp>
#include <harvest/common/log.hpp>

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;
using testing::RawConnection;
using testing::status_of;

engine::WorkflowRegistry workflows() {
  engine::WorkflowRegistry r;
  r.add("echo", [](WorkflowContext&, Json in) { return in; });
  r.add("collector",
        [](WorkflowContext& ctx, Json) { return ctx.wait_signal("add", 60s).value_or(Json()); });
  return r;
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

class HardeningTest : public testing::ApiTest {
 protected:
  static std::string path(const std::string& rest) { return std::string(kPrefix) + rest; }

  // GET /healthz answers 200: the server survived.
  void expect_alive() {
    auto r = get("/healthz");
    ASSERT_TRUE(r) << "the server no longer answers";
    EXPECT_EQ(r->status, 200) << r->body;
  }

  // The body is an error of `kind` carrying the response's request id, and
  // none of the database's words.
  static void expect_error(const httplib::Result& r, int status, const std::string& kind) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    Json j = body(r);
    EXPECT_EQ(j.value("error", ""), kind) << r->body;
    EXPECT_FALSE(j.value("request_id", "").empty()) << r->body;
    EXPECT_EQ(j.value("request_id", ""), r->get_header_value("X-Request-Id"));
    for (const char* internal : {"SQLSTATE", "harvest_", "violates", "index", "relation"}) {
      EXPECT_EQ(r->body.find(internal), std::string::npos) << internal << " in " << r->body;
    }
  }

  long long executions() { return scalar("SELECT count(*) FROM harvest_workflow_executions"); }

  std::string raw_request(std::string_view request, std::chrono::milliseconds wait = 5s) {
    RawConnection c(server_->port());
    EXPECT_TRUE(c.connected());
    c.send(request);
    return c.read_all(wait);
  }
};

// Item 1: JSON nested 100,000 deep anywhere a body carries JSON is a 400
// naming the depth limit, and the process lives on.
TEST_F(HardeningTest, DeeplyNestedJsonIsRefusedWithTheDepthLimit) {
  serve(workflows());
  const std::string deep = nested(100'000);
  for (const std::string& body :
       {R"({"workflow_id":"d1","input":)" + deep + "}", R"({"payload":)" + deep + "}",
        R"({"workflow_id":"d2","signal":"add","payload":)" + deep + "}"}) {
    SCOPED_TRACE(body.substr(0, 40));
    std::string route =
        body.find("signal") != std::string::npos ? path("/workflows/collector/signal-with-start")
        : body.starts_with(R"({"payload")") ? path("/workflows/collector/executions/x/signals/add")
                                            : path("/workflows/echo/start");
    auto r = post(route, body);
    expect_error(r, 400, "bad_request");
    EXPECT_NE(r->body.find("128"), std::string::npos) << r->body;
  }
  // 129 deep: one past the documented default.
  auto r =
      post(path("/workflows/echo/start"), R"({"workflow_id":"d3","input":)" + nested(129) + "}");
  expect_error(r, 400, "bad_request");
  r = post(path("/workflows/echo/start"), R"({"workflow_id":"d4","input":)" + nested(120) + "}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(executions(), 1);
  expect_alive();
}

// Item 1: a chunked body is held to max_body_bytes while it is read: a client
// streaming 200 MB gets 413 after about the limit, and memory stays flat.
TEST_F(HardeningTest, ChunkedBodyOverTheLimitIsRefusedWhileReading) {
  serve(workflows());
  const double rss_before = testing::rss_mib();
  RawConnection c(server_->port());
  ASSERT_TRUE(c.send("POST " + path("/workflows/echo/start") +
                     " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "100000\r\n" + std::string(0x100000, ' ') + "\r\n";
  size_t sent = 0;
  for (int i = 0; i < 200 && c.send(chunk); ++i) sent += chunk.size();
  std::string answer = c.read_all(5s);
  EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
  EXPECT_NE(answer.find("1048576"), std::string::npos);
  // The server stopped reading at the limit: the client could not push
  // anywhere near 200 MB (kernel buffers hold a few MB at most).
  EXPECT_LT(sent, size_t{64} << 20);
  EXPECT_LT(testing::rss_mib() - rss_before, 64.0);
  EXPECT_EQ(executions(), 0);
  expect_alive();
}

// Item 1: Content-Length over the limit is refused before the body is read.
TEST_F(HardeningTest, DeclaredLengthOverTheLimitIsRefusedAtOnce) {
  serve(workflows());
  std::string answer = raw_request("POST " + path("/workflows/echo/start") +
                                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                   "application/json\r\nContent-Length: 209715200\r\n\r\n{");
  EXPECT_EQ(status_of(answer), 413);
  expect_alive();
}

// Item 1: header and URI limits answer 431 and 414.
TEST_F(HardeningTest, OversizedHeadersAndTargetsAreRefused) {
  serve(workflows());
  std::string answer =
      raw_request("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20'000, 'a') +
                  "\r\n\r\n");
  EXPECT_EQ(status_of(answer), 431) << answer.substr(0, 200);
  answer = raw_request("GET " + path("/executions/") + std::string(9'000, 'a') +
                       " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(answer), 414) << answer.substr(0, 200);
  expect_alive();
}

// Item 2: idle and dripping connections cannot starve the server. 2,000 idle
// connections (over the 1,024 cap: the oldest idle ones make room) and 16
// connections dripping a header byte a second; a new request is answered at
// once, and the drippers are closed when their read deadline passes.
TEST_F(HardeningTest, IdleAndSlowConnectionsDoNotStarveNewRequests) {
  api::ApiConfig cfg;
  cfg.threads = 2;
  cfg.read_timeout = 2s;
  serve(workflows(), {}, cfg);
  std::vector<RawConnection> idle;
  idle.reserve(2000);
  for (int i = 0; i < 2000; ++i) idle.emplace_back(server_->port());
  std::vector<RawConnection> drip;
  for (int i = 0; i < 16; ++i) {
    drip.emplace_back(server_->port());
    drip.back().send("G");
  }
  auto t0 = std::chrono::steady_clock::now();
  expect_alive();
  auto r = post(path("/workflows/echo/start"), R"({"workflow_id":"w","input":1})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s * harvest::testing::kSanitizerSlowdown);
  for (int s = 0; s < 3; ++s) {
    for (auto& d : drip) d.send("E");
    std::this_thread::sleep_for(1s);
  }
  int closed = 0;
  for (auto& d : drip) closed += d.closed_by_peer(2s) ? 1 : 0;
  EXPECT_EQ(closed, 16) << "a connection dripping its headers outlived read_timeout";
  expect_alive();
}

// Idle and slow clients: 16 connections dripping a header byte every 3 s
// beside 2,000 idle ones, all held by the server (max_connections 4096).
// Once every one was accepted, /healthz and an authenticated API request are
// each answered within 1 s, again and again for 9 s.
TEST_F(HardeningTest, HealthAndApiAnswerWithin1sBeside16DrippingAnd2000IdleConnections) {
  api::ApiConfig cfg;
  cfg.token = "t";
  cfg.threads = 2;
  cfg.max_connections = 4096;
  cfg.read_timeout = 15s;        // the drippers outlive the measurement
  cfg.keep_alive_timeout = 15s;  // and so do the idle connections
  serve(workflows(), {}, cfg);
  std::vector<RawConnection> idle;
  idle.reserve(2000);
  for (int i = 0; i < 2000; ++i) {
    idle.emplace_back(server_->port());
    ASSERT_TRUE(idle.back().connected()) << "connection " << i << ": out of descriptors?";
  }
  std::vector<RawConnection> drip;
  for (int i = 0; i < 16; ++i) {
    drip.emplace_back(server_->port());
    ASSERT_TRUE(drip.back().connected());
    drip.back().send("G");
  }
  // Accepts are first come, first served: once a later request is answered,
  // every connection above is open on the server.
  expect_alive();
  const httplib::Headers auth{{"Authorization", "Bearer t"}};
  const auto bound = 1s * harvest::testing::kSanitizerSlowdown;
  for (int round = 0; round < 6; ++round) {
    if (round % 2 == 0) {
      for (auto& d : drip) EXPECT_TRUE(d.send("E")) << "a dripper was closed early";
    }
    auto t0 = std::chrono::steady_clock::now();
    auto health = get("/healthz");
    const auto health_took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_LT(health_took, bound)
        << "round " << round << ": /healthz took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(health_took).count() << " ms";
    t0 = std::chrono::steady_clock::now();
    auto r = post(path("/workflows/echo/start"),
                  R"({"workflow_id":"w)" + std::to_string(round) + R"(","input":1})", auth);
    const auto api_took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    EXPECT_LT(api_took, bound)
        << "round " << round << ": the start took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(api_took).count() << " ms";
    std::this_thread::sleep_for(1500ms);
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 6);
}

// A connection that never sends a byte is closed after keep_alive_timeout,
// as a kept-alive one between requests is, not held for read_timeout.
TEST_F(HardeningTest, AConnectionThatSendsNothingIsClosedAfterTheKeepAliveTimeout) {
  api::ApiConfig cfg;
  cfg.keep_alive_timeout = 1s;
  cfg.read_timeout = 30s;
  serve(workflows(), {}, cfg);
  RawConnection silent(server_->port());
  ASSERT_TRUE(silent.connected());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_by_peer(5s)) << "held past keep_alive_timeout";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  expect_alive();
}

// A body that stops arriving is answered 408 when read_timeout passes, then
// the connection closes (it used to close without a word).
TEST_F(HardeningTest, ABodyThatStallsPastTheReadTimeoutHearsA408) {
  api::ApiConfig cfg;
  cfg.read_timeout = 1s;
  serve(workflows(), {}, cfg);
  RawConnection c(server_->port());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send("POST " + path("/workflows/echo/start") +
                     " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{\"input\":"));
  const std::string answer = c.read_all(5s);
  EXPECT_EQ(status_of(answer), 408) << answer.substr(0, 300);
  EXPECT_NE(answer.find("request_timeout"), std::string::npos) << answer.substr(0, 300);
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer.substr(0, 300);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
  EXPECT_EQ(executions(), 0);
  expect_alive();
}

// HEAD on a GET route answers as GET without the body (it used to be 405);
// the connection stays usable for the next request.
TEST_F(HardeningTest, HeadAnswersAsGetWithoutABody) {
  serve(workflows());
  auto started = post(path("/workflows/echo/start"), R"({"workflow_id":"h","input":1})");
  ASSERT_TRUE(started);
  ASSERT_EQ(started->status, 201) << started->body;
  const std::string id = body(started).value("execution_id", "");
  auto full = get(path("/executions/" + id));
  ASSERT_TRUE(full);
  ASSERT_EQ(full->status, 200);

  RawConnection c(server_->port());
  const std::string target = path("/executions/" + id);
  ASSERT_TRUE(c.send("HEAD " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  const std::string answers = c.read_all(5s);
  EXPECT_EQ(status_of(answers), 200) << answers.substr(0, 300);
  const size_t head_end = answers.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  const std::string head = answers.substr(0, head_end);
  EXPECT_NE(head.find("Content-Length: " + std::to_string(full->body.size())), std::string::npos)
      << head;
  // Straight after the HEAD's headers comes the next answer, not a body.
  EXPECT_TRUE(answers.substr(head_end + 4).starts_with("HTTP/1.1 200")) << answers;

  // HEAD on a path that only takes POST is still a 405.
  std::string refused = raw_request("HEAD " + path("/workflows/echo/start") +
                                    " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(refused), 405) << refused.substr(0, 200);
}

// Item 2: /healthz has its own thread: it answers while every request thread
// is busy (here: blocked on a table lock held by another session).
TEST_F(HardeningTest, HealthAnswersWhileTheRequestThreadsAreBusy) {
  api::ApiConfig cfg;
  cfg.threads = 2;
  serve(workflows(), {}, cfg);
  auto locker = store::Connection::open(db_url());
  ASSERT_TRUE(locker);
  ASSERT_TRUE((*locker)->exec("BEGIN"));
  ASSERT_TRUE((*locker)->exec("LOCK TABLE harvest_workflow_executions IN ACCESS EXCLUSIVE MODE"));
  std::vector<std::thread> busy;
  for (int i = 0; i < 4; ++i) {
    busy.emplace_back([this, i] {
      (void)post(path("/workflows/echo/start"),
                 Json{{"workflow_id", "busy" + std::to_string(i)}, {"input", i}});
    });
  }
  std::this_thread::sleep_for(300ms);
  auto t0 = std::chrono::steady_clock::now();
  expect_alive();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s * harvest::testing::kSanitizerSlowdown);
  ASSERT_TRUE((*locker)->exec("ROLLBACK"));
  for (auto& t : busy) t.join();
  EXPECT_EQ(executions(), 4);
}

// Item 3: identifiers over their limits or holding NUL are 400s naming the
// field — never a PostgreSQL index error — and NUL never truncates.
TEST_F(HardeningTest, OversizedOrNulIdentifiersAreBadRequests) {
  serve(workflows());
  auto r = post(path("/workflows/echo/start"),
                Json{{"workflow_id", std::string(10'000, 'w')}, {"input", 1}});
  expect_error(r, 400, "bad_request");
  EXPECT_NE(r->body.find("workflow_id"), std::string::npos) << r->body;
  r = post(path("/workflows/collector/signal-with-start"),
           Json{{"workflow_id", "c"}, {"signal", std::string(6'000, 's')}});
  expect_error(r, 400, "bad_request");
  for (const char* id : {"x\\u0000A", "x\\u0000B"}) {
    r = post(path("/workflows/echo/start"),
             std::string(R"({"workflow_id":")") + id + R"(","input":1})");
    expect_error(r, 400, "bad_request");
  }
  r = post(path("/workflows/echo/start"),
           R"({"workflow_id":"k","input":1,"idempotency_key":"k\u0000A"})");
  expect_error(r, 400, "bad_request");
  // %00 in a workflow name reaches no workflow.
  r = post(path("/workflows/echo%00x/start"), R"({"workflow_id":"n","input":1})");
  ASSERT_TRUE(r);
  EXPECT_GE(r->status, 400);
  EXPECT_LT(r->status, 500);
  EXPECT_EQ(executions(), 0);
  expect_alive();
}

// Item 4: a server-side failure answers a generic message and a request id;
// the cause is logged under that id.
TEST(HardeningErrors, ServerFailuresAnswerGenericallyAndLogTheCause) {
  Error e = Error::internal("store refused the write");
  e.detail = "ERROR: index row size 9000 exceeds btree maximum (SQLSTATE 54000)";
  ApiResponse r = error_response(e);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("SQLSTATE"), std::string::npos);
  EXPECT_EQ(r.body.find("store refused"), std::string::npos);
  EXPECT_NE(r.log_detail.find("SQLSTATE 54000"), std::string::npos);
  ApiResponse t = error_response(Error::transient_error("connection to server refused"));
  EXPECT_EQ(t.status, 503);
  EXPECT_EQ(t.body.find("connection to server"), std::string::npos);
}

// Item 5: /healthz never shows the database password, whatever form the
// connection string takes.
TEST_F(HardeningTest, HealthNeverShowsTheDatabasePassword) {
  std::smatch m;
  const std::string url = db_url();
  ASSERT_TRUE(std::regex_match(url, m, std::regex(R"(postgresql://([^@]+)@([^:/]+):(\d+)/(.+))")))
      << url;
  for (const std::string& conninfo :
       {fmt::format("host={} port={} user={} dbname={} password=hunter2-secret", m[2].str(),
                    m[3].str(), m[1].str(), m[4].str()),
        fmt::format("postgresql://{}:hunter2-secret@{}:{}/{}?sslpassword=hunter2-ssl", m[1].str(),
                    m[2].str(), m[3].str(), m[4].str())}) {
    engine::EngineConfig cfg;
    cfg.database_url = conninfo;
    cfg.profile = engine::Profile::kTest;
    auto e = engine::Engine::open(cfg, workflows());
    ASSERT_TRUE(e) << e.error().message;
    api::ApiConfig acfg;
    acfg.port = 0;
    acfg.metrics = std::make_shared<metrics::PrometheusMetrics>();
    api::HttpServer server(**e, acfg);
    ASSERT_TRUE(server.start());
    httplib::Client c("127.0.0.1", server.port());
    auto r = c.Get("/healthz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->body.find("hunter2"), std::string::npos) << r->body;
  }
}

// Item 6: with a token, every route but /healthz and /metrics needs it.
TEST_F(HardeningTest, TokenGuardsEveryRouteButHealthAndMetrics) {
  api::ApiConfig cfg;
  cfg.token = "s3cret-token";
  serve(workflows(), {}, cfg);
  auto c = client();
  auto r =
      c.Post(path("/workflows/echo/start"), R"({"workflow_id":"a","input":1})", "application/json");
  expect_error(r, 401, "unauthorized");
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer realm=\"harvest\"");
  r = c.Post(path("/workflows/echo/start"), {{"Authorization", "Bearer s3cret-tokeX"}},
             R"({"workflow_id":"a","input":1})", "application/json");
  expect_error(r, 401, "unauthorized");
  r = c.Get(path("/executions"));
  expect_error(r, 401, "unauthorized");
  EXPECT_EQ(executions(), 0);
  r = c.Post(path("/workflows/echo/start"), {{"Authorization", "Bearer s3cret-token"}},
             R"({"workflow_id":"a","input":1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
}

TEST_F(HardeningTest, MetricsCanRequireTheToken) {
  api::ApiConfig cfg;
  cfg.token = "t0ken";
  cfg.metrics_require_token = true;
  serve(workflows(), {}, cfg);
  auto c = client();
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(c.Get("/metrics", {{"Authorization", "Bearer t0ken"}})->status, 200);
}

// Item 6: a non-loopback address without a token is refused at start.
TEST_F(HardeningTest, RemoteListenerWithoutTokenIsRefused) {
  metrics_ = std::make_shared<metrics::PrometheusMetrics>();
  engine_ = open_engine(workflows());
  ASSERT_TRUE(engine_);
  api::ApiConfig cfg;
  cfg.host = "0.0.0.0";
  cfg.port = 0;
  api::HttpServer server(*engine_, cfg);
  auto started = server.start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().kind, ErrorKind::kConfig);
  EXPECT_NE(started.error().message.find("HARVEST_API_TOKEN"), std::string::npos);
  cfg.allow_unauthenticated_remote = true;
  api::HttpServer allowed(*engine_, cfg);
  EXPECT_TRUE(allowed.start());
}

// Item 6: a cross-site text/plain POST starts nothing (415), and a foreign
// Host is refused (DNS rebinding).
TEST_F(HardeningTest, MutatingRoutesNeedJsonAndAKnownHost) {
  serve(workflows());
  auto c = client();
  auto r = c.Post(path("/workflows/echo/start"), R"({"workflow_id":"a","input":1})", "text/plain");
  expect_error(r, 415, "unsupported_media_type");
  r = c.Post(path("/workflows/echo/start"), {{"Host", "evil.example"}},
             R"({"workflow_id":"a","input":1})", "application/json");
  expect_error(r, 421, "misdirected_request");
  std::string answer =
      raw_request("GET /healthz HTTP/1.1\r\nHost: rebind.attacker.test:8080\r\n\r\n");
  EXPECT_EQ(status_of(answer), 421);
  answer =
      raw_request("GET /healthz HTTP/1.1\r\nHost: localhost:1234\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(answer), 200) << answer.substr(0, 200);
  r = c.Get(path("/workflows/echo/start"));
  expect_error(r, 405, "method_not_allowed");
  EXPECT_EQ(executions(), 0);
}

// Item 7: unknown workflow names in URLs share one `unknown` label, and
// every label value in /metrics is valid UTF-8.
TEST_F(HardeningTest, MetricLabelsStayBoundedAndValidUtf8) {
  serve(workflows());
  for (int i = 0; i < 200; ++i) {
    (void)post(path("/workflows/nope" + std::to_string(i) + "/start"),
               R"({"workflow_id":"a","input":1})");
  }
  (void)post(path("/workflows/%FF%FEbad/start"), R"({"workflow_id":"a","input":1})");
  auto m = get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->body.find("nope1"), std::string::npos);
  EXPECT_EQ(m->body.find("\xFF"), std::string::npos);
  EXPECT_NE(m->body.find("workflow=\"unknown\""), std::string::npos) << m->body.substr(0, 2000);
}

}  // namespace
}  // namespace harvest::api
