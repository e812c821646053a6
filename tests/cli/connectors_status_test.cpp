// `harvest connectors status` reads each binding's lag, in flight, last pass
// and stalls from a running process's /metrics. The parser and the replica
// merge are pinned on a hand-written two-process exposition; the command end
// to end against a real HttpServer whose PrometheusMetrics a
// ConnectorRuntime over MockSource filled (two orders dispatched, one poison
// order dead-lettered, lag 3).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "api_fixture.hpp"
#include "connector_fixture.hpp"
#include <harvest/cli/cli.hpp>
#include <harvest/cli/connectors_status.hpp>
#include <harvest/connector/runtime.hpp>

namespace harvest::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const char* kReplicaA = R"(# HELP harvest_connector_lag records owed
# TYPE harvest_connector_lag gauge
harvest_connector_lag{source="orders"} 12
harvest_connector_lag{source="we\"ird"} 1
harvest_connector_in_flight{source="orders"} 4
harvest_connector_last_pass_timestamp_seconds{source="orders"} 1700000000
harvest_connector_recoveries_total{source="orders"} 1
harvest_connector_store_unavailable{source="orders"} 0
harvest_connector_dispatched_total{outcome="started",source="orders"} 10
harvest_connector_dispatched_total{outcome="duplicate",source="orders"} 2
harvest_connector_dead_lettered_total{reason="mapping_rejected",source="orders"} 1
harvest_engine_runs_completed_total 99
)";
const char* kReplicaB = R"(harvest_connector_lag{source="orders"} 7
harvest_connector_in_flight{source="orders"} 3
harvest_connector_last_pass_timestamp_seconds{source="orders"} 1700000005
harvest_connector_recoveries_total{source="orders"} 2
harvest_connector_store_unavailable{source="orders"} 1
harvest_connector_dispatched_total{outcome="started",source="orders"} 5
harvest_connector_retried_total{reason="store_unavailable",source="orders"} 6
)";

TEST(ConnectorsStatusParse, SumsOutcomesAndMergesReplicas) {
  auto a = parse_connector_status(kReplicaA);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ(a->at("we\"ird").lag, 1.0) << "escaped quote in a label value";
  const BindingStatus& oa = a->at("orders");
  EXPECT_EQ(oa.dispatched, 12) << "every outcome counts";
  EXPECT_EQ(oa.dead_lettered, 1);
  EXPECT_FALSE(oa.store_unavailable);

  auto b = parse_connector_status(kReplicaB);
  ASSERT_TRUE(b) << b.error().message;
  merge_status(*a, *b);
  const BindingStatus& o = a->at("orders");
  EXPECT_EQ(o.lag, 12.0) << "lag is the maximum over replicas, not the sum";
  EXPECT_EQ(o.in_flight, 7);
  EXPECT_EQ(o.last_pass, 1700000005.0) << "the newest pass";
  EXPECT_EQ(o.stalls, 3);
  EXPECT_TRUE(o.store_unavailable) << "one replica without its store shows";
  EXPECT_EQ(o.dispatched, 17);
  EXPECT_EQ(o.retried, 6);
  EXPECT_EQ(o.processes, 2);
}

TEST(ConnectorsStatusParse, MalformedSampleNamesItsLine) {
  auto r = parse_connector_status("# c\nharvest_connector_lag{source=\"x\"} twelve\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("line 2"), std::string::npos) << r.error().message;
  auto open = parse_connector_status("harvest_connector_lag{source=\"x} 1\n");
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("line 1"), std::string::npos) << open.error().message;
}

// A peer that accepts the connection (the kernel completes it from the
// listen backlog) and never answers: the read must end at the timeout.
TEST(ConnectorsStatusHttp, ASilentPeerEndsAtTheTimeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/metrics";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = http_get(url, "", 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTransient) << r.error().message;
  EXPECT_NE(r.error().message.find(url), std::string::npos) << r.error().message;
  EXPECT_LT(took, 5s) << "bounded by the 300 ms timeout";
}

int cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream o, e;
  const int rc = run_cli(static_cast<int>(argv.size()), argv.data(), o, e);
  out = o.str();
  err = e.str();
  return rc;
}

class ConnectorsStatusTest : public harvest::testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    api::ApiConfig api;
    api.token = "s3cret-token";
    api.metrics_require_token = true;
    serve(connector::testing::connector_workflows(), {}, api);
    url_ = "http://127.0.0.1:" + std::to_string(server_->port()) + "/metrics";
    binding_ = connector::testing::order_binding().name();
    ASSERT_TRUE(connector::testing::run_order_workload(*engine_, metrics_));
  }
  std::string url_, binding_;
};

TEST_F(ConnectorsStatusTest, ReportsEveryBindingFromARealExposition) {
  std::string out, err;
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_EQ(cli({"harvest", "connectors", "status", "--metrics-url", url_, "--token",
                 "s3cret-token", "--json"},
                out, err),
            0)
      << err;
  const json doc = json::parse(out);
  ASSERT_EQ(doc.at("bindings").size(), 1u) << out;
  const json& b = doc.at("bindings")[0];
  EXPECT_EQ(b.at("binding"), binding_);
  EXPECT_EQ(b.at("dispatched").get<double>(), 2) << out;
  EXPECT_EQ(b.at("dead_lettered").get<double>(), 1) << out;
  EXPECT_EQ(b.at("retried").get<double>(), 2) << "two strikes before the dead letter: " << out;
  EXPECT_EQ(b.at("lag").get<double>(), 3) << out;
  EXPECT_EQ(b.at("in_flight").get<double>(), 0) << out;
  EXPECT_EQ(b.at("stalls").get<double>(), 0) << out;
  EXPECT_EQ(b.at("store_unavailable"), false);
  EXPECT_EQ(b.at("processes"), 1);
  EXPECT_GT(b.at("last_pass_unix").get<double>(), before - 60) << out;
  EXPECT_LE(b.at("last_pass_unix").get<double>(), before + 1) << out;

  ASSERT_EQ(
      cli({"harvest", "connectors", "status", "--metrics-url", url_, "--token", "s3cret-token"},
          out, err),
      0)
      << err;
  EXPECT_NE(out.find("BINDING"), std::string::npos) << out;
  EXPECT_NE(out.find(binding_), std::string::npos) << out;
}

TEST_F(ConnectorsStatusTest, AnUnreadableReplicaFailsNamingIt) {
  std::string out, err;
  // A guarded /metrics without the token: the status, not a silent empty table.
  EXPECT_EQ(cli({"harvest", "connectors", "status", "--metrics-url", url_}, out, err), 1);
  EXPECT_NE(err.find(url_ + ": HTTP 401"), std::string::npos) << err;

  // Nothing listens on port 1; the reachable replica is still shown.
  const std::string dead = "http://127.0.0.1:1/metrics";
  EXPECT_EQ(cli({"harvest", "connectors", "status", "--metrics-url", url_ + "," + dead, "--token",
                 "s3cret-token", "--json"},
                out, err),
            1);
  EXPECT_NE(err.find(dead), std::string::npos) << err;
  EXPECT_EQ(json::parse(out).at("bindings").size(), 1u) << out;

  // Credentials in the URL are refused without being echoed.
  EXPECT_EQ(cli({"harvest", "connectors", "status", "--metrics-url",
                 "http://admin:hunter2@127.0.0.1:1/metrics"},
                out, err),
            1);
  EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
  EXPECT_NE(err.find("--token"), std::string::npos) << err;
}

}  // namespace
}  // namespace harvest::cli
