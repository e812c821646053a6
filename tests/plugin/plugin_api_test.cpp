// ENG-12: the plugin mounts the HTTP API, so one builder
// wires connectors, workers and the API, started and stopped in order.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

#include "connector_fixture.hpp"
#include <harvest/metrics/prometheus.hpp>
#include <harvest/plugin/plugin.hpp>

namespace harvest::plugin {
namespace {

using connector::MockSource;
using connector::testing::connector_workflows;
using connector::testing::order_binding;
using connector::testing::order_json;
using namespace std::chrono_literals;

class PluginApiTest : public harvest::testing::PgTest {
 protected:
  // The API on a free loopback port.
  static api::ApiConfig api_on_free_port() {
    api::ApiConfig config;
    config.port = 0;
    return config;
  }
};

TEST_F(PluginApiTest, one_builder_serves_the_api_beside_connectors_and_workers) {
  auto source = std::make_shared<MockSource>("orders.placed");
  const engine::EngineConfig config = engine_config();
  auto prometheus = std::make_shared<metrics::PrometheusMetrics>();
  const api::ApiConfig api_config = api_on_free_port();
  auto app = HarvestPlugin()
                 .engine_config(config)
                 .workflows(connector_workflows())
                 .connector(order_binding("orders"), source)
                 .worker(engine::WorkerConfig{.concurrency = 2, .poll_interval = 20ms})
                 .metrics(prometheus)
                 .api("/ops/harvest", api_config)
                 .build();
  EXPECT_EQ(app->api_server(), nullptr) << "the API starts with the app, not at build";
  app->start();
  ASSERT_NE(app->api_server(), nullptr);
  const int port = app->api_server()->port();
  ASSERT_GT(port, 0);

  source->push_kafka(0, 0, order_json("A-1"));
  ASSERT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                   "'completed'") == 1;
      },
      20s));
  httplib::Client c("127.0.0.1", port);
  auto listed = c.Get("/ops/harvest/executions");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200) << listed->body;
  EXPECT_NE(listed->body.find("\"completed\""), std::string::npos) << listed->body;
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("harvest_connector_dispatched"), std::string::npos)
      << "the API renders the plugin's recorder";
  EXPECT_EQ(c.Get("/api/harvest/executions")->status, 404) << "the prefix is the plugin's";

  app->stop();
  EXPECT_EQ(app->api_server(), nullptr);
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1);
  EXPECT_FALSE(after.Get("/healthz")) << "stopped with the app";
}

// Issue 15 end to end: a poison message is dead-lettered by the running
// binding, the cause is fixed, an operator asks for a replay over HTTP, and
// the same binding's consumer thread replays it into exactly one run.
TEST_F(PluginApiTest, a_replay_asked_over_http_is_run_by_the_binding_into_one_execution) {
  auto accept = std::make_shared<std::atomic<bool>>(false);
  auto binding = connector::SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  binding
      .map_json([accept](const connector::MessageCtx&,
                         connector::testing::Order o) -> connector::MapResult {
        if (!*accept) return std::unexpected("unknown customer");
        return connector::MappedMessage{"order-" + o.order_id, o};
      })
      .poison_threshold(1);
  auto source = std::make_shared<MockSource>("orders.placed");
  const engine::EngineConfig config = engine_config();
  const api::ApiConfig api_config = api_on_free_port();
  auto app = HarvestPlugin()
                 .engine_config(config)
                 .workflows(connector_workflows())
                 .connector_with_config(binding, source,
                                        connector::ConnectorRuntimeConfig{
                                            .idle_backoff = 10ms, .replay_poll_interval = 20ms})
                 .api("/api/harvest", api_config)
                 .build();
  app->start();
  source->push_kafka(0, 0, order_json("N-1"));
  ASSERT_TRUE(eventually([&] { return source->committed(0) == 1; }));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);

  accept->store(true);
  httplib::Client c("127.0.0.1", app->api_server()->port());
  const std::string ask = R"({"binding": "orders", "requested_by": "ops@example"})";
  auto marked = c.Post("/api/harvest/connector-dead-letters/replay", ask, "application/json");
  ASSERT_TRUE(marked);
  ASSERT_EQ(marked->status, 200) << marked->body;
  ASSERT_TRUE(eventually([&] {
    return scalar(
               "SELECT count(*) FROM harvest_connector_dead_letters WHERE replay_outcome = "
               "'started'") == 1;
  }));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'order-N-1'"),
            1);
  // Asking again is a no-op success, and nothing more runs.
  auto again = c.Post("/api/harvest/connector-dead-letters/replay", ask, "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_NE(again->body.find("\"already_replayed\":1"), std::string::npos) << again->body;
  auto shown = c.Get("/api/harvest/connector-dead-letters?binding=orders");
  ASSERT_TRUE(shown);
  EXPECT_NE(shown->body.find("\"replay_requested_by\":\"ops@example\""), std::string::npos)
      << shown->body;
  app->stop();
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
}

// Issue 33: the console's overview reads the running bindings themselves
// (GET {prefix}/connectors), not a scrape of /metrics: what each dispatched,
// dead-lettered and whether it runs.
TEST_F(PluginApiTest, the_connectors_route_shows_each_running_binding_and_its_counts) {
  auto source = std::make_shared<MockSource>("orders.placed");
  const engine::EngineConfig config = engine_config();
  const api::ApiConfig api_config = api_on_free_port();
  auto app = HarvestPlugin()
                 .engine_config(config)
                 .workflows(connector_workflows())
                 .connector_with_config(order_binding("orders"), source,
                                        connector::ConnectorRuntimeConfig{.idle_backoff = 10ms})
                 .api("/api/harvest", api_config)
                 .build();
  app->start();
  source->push_kafka(0, 0, order_json("C-1"));
  source->push_kafka(0, 1, order_json("C-2"));
  source->push_kafka(0, 2, "not json");
  ASSERT_TRUE(eventually([&] { return source->committed(0) == 3; }));
  httplib::Client c("127.0.0.1", app->api_server()->port());
  nlohmann::json item;
  ASSERT_TRUE(eventually([&] {
    auto r = c.Get("/api/harvest/connectors");
    if (!r || r->status != 200) return false;
    auto j = nlohmann::json::parse(r->body);
    if (j["items"].size() != 1) return false;
    item = j["items"][0];
    return item["dispatched"] == 2 && item["dead_lettered"] == 1;
  })) << item.dump();
  EXPECT_EQ(item["binding"], "orders");
  EXPECT_EQ(item["kind"], "start");
  EXPECT_EQ(item["stream"], "orders.placed");
  EXPECT_EQ(item["workflow"], "fulfil_order");
  EXPECT_EQ(item["running"], true);
  EXPECT_EQ(item["store_available"], true);
  EXPECT_EQ(item["in_flight"], 0);
  EXPECT_EQ(item["stalls"], 0);
  EXPECT_EQ(item["rebuilds"], 0);
  EXPECT_TRUE(item["last_pass_at"].is_string()) << item.dump();
  app->stop();
}

// Issue 51: a binding holding on a coordinate collision says so where an
// operator looks — GET /connectors names the coordinates and the remedy,
// /healthz turns "degraded" (still 200: the process serves), and the
// exported gauge and counter read 1.
TEST_F(PluginApiTest, a_binding_holding_on_a_collision_shows_in_connectors_and_healthz) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto metrics = std::make_shared<metrics::PrometheusMetrics>();
  auto app = HarvestPlugin()
                 .engine_config(engine_config())
                 .workflows(connector_workflows())
                 .connector_with_config(order_binding("orders"), source,
                                        connector::ConnectorRuntimeConfig{.idle_backoff = 10ms})
                 .metrics(metrics)
                 .api("/api/harvest", api_on_free_port())
                 .build();
  app->start();
  source->push_kafka(0, 0, order_json("C-1"));
  ASSERT_TRUE(eventually([&] { return source->committed(0) == 1; }));
  source->push_kafka(0, 0, order_json("D-1"));  // another record at the same offset
  httplib::Client c("127.0.0.1", app->api_server()->port());
  nlohmann::json item;
  ASSERT_TRUE(eventually([&] {
    auto r = c.Get("/api/harvest/connectors");
    if (!r || r->status != 200) return false;
    item = nlohmann::json::parse(r->body)["items"][0];
    return item["collision_hold"].is_string();
  })) << item.dump();
  const std::string hold = item["collision_hold"];
  EXPECT_NE(hold.find("orders.placed:0:0"), std::string::npos) << hold;
  EXPECT_NE(hold.find("key_incarnation"), std::string::npos) << hold;
  EXPECT_EQ(item["collisions"], 1);
  auto health = c.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto h = nlohmann::json::parse(health->body);
  EXPECT_EQ(h["status"], "degraded");
  ASSERT_EQ(h["bindings_holding"].size(), 1u) << h.dump();
  EXPECT_EQ(h["bindings_holding"][0]["binding"], "orders");
  const std::string exposition = metrics->render();
  EXPECT_NE(exposition.find("harvest_connector_collision_hold{source=\"orders\"} 1"),
            std::string::npos);
  EXPECT_NE(exposition.find("harvest_connector_coordinate_collisions_total{source=\"orders\"} 1"),
            std::string::npos);
  app->stop();
  EXPECT_EQ(source->committed(0), 1) << "nothing past the collision was committed";
}

TEST_F(PluginApiTest, an_api_that_cannot_listen_fails_start_naming_the_address) {
  const engine::EngineConfig config = engine_config();
  api::ApiConfig api_config;
  api_config.host = "203.0.113.1";  // not an address of this machine (TEST-NET-3)
  api_config.token = "t";
  auto app = HarvestPlugin()
                 .engine_config(config)
                 .workflows(connector_workflows())
                 .api("/api/harvest", api_config)
                 .build();
  try {
    app->start();
    FAIL() << "start() should throw";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("203.0.113.1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace harvest::plugin
