// CON-4, CON-17: build-time refusals and warnings, each asserted by content;
// the plugin wiring end to end on MockSource.
#include <gtest/gtest.h>

#include "connector_fixture.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/plugin/plugin.hpp>

namespace harvest::plugin {
namespace {

using connector::IdempotencyMode;
using connector::MockSource;
using connector::SourceBinding;
using connector::testing::connector_workflows;
using connector::testing::order_binding;
using connector::testing::order_json;
using namespace std::chrono_literals;

std::shared_ptr<MockSource> mock(std::string subscription, std::string stream = "orders.placed") {
  auto s = std::make_shared<MockSource>(stream);
  s->subscription(std::move(subscription));
  return s;
}

class PluginTest : public harvest::testing::PgTest {
 protected:
  HarvestPlugin plugin() {
    HarvestPlugin p;
    engine::EngineConfig config;
    config = engine_config(config);
    config.profile = engine::Profile::kTest;
    p.engine_config(config).workflows(connector_workflows());
    return p;
  }
  std::string refusal_of(HarvestPlugin p) {
    try {
      (void)p.build();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(PluginTest, refuses_an_unregistered_target_workflow) {
  auto msg = refusal_of(plugin().connector(order_binding("orders", "no_such_flow"), mock("a")));
  EXPECT_NE(msg.find("binding 'orders' targets workflow 'no_such_flow', which is not registered"),
            std::string::npos)
      << msg;
}

TEST_F(PluginTest, refuses_duplicate_binding_names) {
  auto msg = refusal_of(plugin()
                            .connector(order_binding("orders"), mock("a"))
                            .connector(order_binding("orders"), mock("b")));
  EXPECT_NE(msg.find("two connectors are named 'orders'"), std::string::npos) << msg;
}

TEST_F(PluginTest, refuses_two_bindings_on_one_subscription_naming_both) {
  auto msg = refusal_of(plugin()
                            .connector(order_binding("orders-a"), mock("kafka|a:9092|g|t"))
                            .connector(order_binding("orders-b"), mock("kafka|a:9092|g|t")));
  EXPECT_NE(msg.find("bindings 'orders-a' and 'orders-b' consume the same subscription"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("own consumer group"), std::string::npos);
}

TEST_F(PluginTest, refuses_broker_native_dead_letter_without_a_destination) {
  auto b = order_binding();
  b.broker_native_dead_letter();
  auto msg = refusal_of(plugin().connector(b, mock("a")));
  EXPECT_NE(msg.find("binding 'orders' uses broker_native_dead_letter() but its source reports "
                     "no dead-letter destination"),
            std::string::npos)
      << msg;
  auto with_dlq = mock("b");
  with_dlq->dead_letter_destination("arn:dlq");
  EXPECT_EQ(refusal_of(plugin().connector(b, with_dlq)), "");
}

TEST_F(PluginTest, refuses_forced_coordinates_on_a_deferred_admission_workflow) {
  auto b = order_binding("throttled", "throttled_order");
  b.idempotency_mode(IdempotencyMode::kBrokerCoordinates);
  auto msg = refusal_of(plugin().connector(b, mock("a")));
  EXPECT_NE(msg.find("binding 'throttled' forces idempotency_mode(BrokerCoordinates) on workflow "
                     "'throttled_order', which has a deferred-admission policy"),
            std::string::npos)
      << msg;
}

TEST_F(PluginTest, refuses_a_binding_without_mapping_and_max_in_flight_zero) {
  auto unmapped = SourceBinding::starts("bare", "orders.placed", "fulfil_order");
  auto msg = refusal_of(plugin().connector(unmapped, mock("a")));
  EXPECT_NE(msg.find("binding 'bare' has no mapping function"), std::string::npos) << msg;
  auto zero = order_binding("zero");
  zero.max_in_flight(0);
  msg = refusal_of(plugin().connector(zero, mock("b")));
  EXPECT_NE(msg.find("binding 'zero' has max_in_flight(0)"), std::string::npos) << msg;
}

TEST_F(PluginTest, distinct_subscriptions_on_one_topic_are_accepted_with_a_fan_in_warning) {
  log::LogCapture capture;
  auto app = plugin()
                 .connector(order_binding("orders-a"), mock("kafka|a:9092|group-1|t"))
                 .connector(order_binding("orders-b"), mock("kafka|a:9092|group-2|t"))
                 .start_idempotency_window(std::chrono::hours(24 * 7))
                 .build();
  ASSERT_TRUE(app);
  EXPECT_TRUE(
      capture.contains({"bindings 'orders-a' and 'orders-b' feed stream 'orders.placed' "
                        "into workflow 'fulfil_order' from different subscriptions",
                        "fan-in"}));
}

TEST_F(PluginTest,
       warns_on_the_default_window_for_coordinate_starts_and_is_silenced_by_setting_it) {
  {
    log::LogCapture capture;
    auto app = plugin().connector(order_binding(), mock("a")).build();
    EXPECT_TRUE(capture.contains({"binding 'orders' dedupes on broker coordinates", "24 h default",
                                  "start_idempotency_window"}));
  }
  {
    log::LogCapture capture;
    auto app = plugin()
                   .connector(order_binding(), mock("a"))
                   .start_idempotency_window(std::chrono::hours(1))
                   .build();
    EXPECT_EQ(capture.count_containing("24 h default"), 0u);
  }
  {
    log::LogCapture capture;  // a window set through engine_config counts as set
    engine::EngineConfig config;
    config = engine_config(config);
    config.profile = engine::Profile::kTest;
    config.start_idempotency_window = std::chrono::hours(24 * 7);
    HarvestPlugin p;
    p.engine_config(config).workflows(connector_workflows());
    auto app = p.connector(order_binding(), mock("a")).build();
    EXPECT_EQ(capture.count_containing("24 h default"), 0u);
  }
  {
    log::LogCapture capture;  // workflow-id dedupe: the window is not what protects it
    auto app = plugin().connector(order_binding("t", "throttled_order"), mock("a")).build();
    EXPECT_EQ(capture.count_containing("24 h default"), 0u);
  }
}

TEST_F(PluginTest, warns_for_signals_with_start_targets_under_retention_with_the_effective_age) {
  log::LogCapture capture;
  auto b = SourceBinding::signals_with_start("telemetry", "device-telemetry", "device_session",
                                             "reading");
  b.map_json([](const connector::MessageCtx&, engine::Json j) -> connector::MapResult {
    return connector::MappedMessage{"device-" + j.value("id", "x"), j};
  });
  auto app = plugin()
                 .connector(b, mock("q", "device-telemetry"))
                 .retention(engine::RetentionConfig{}
                                .with_max_age(std::chrono::hours(72))
                                .with_workflow_max_age("device_session", std::chrono::hours(24)))
                 .build();
  EXPECT_TRUE(capture.contains({"binding 'telemetry'", "workflow 'device_session'", "86400 s"}));
}

// A binding whose source consumes another stream is refused at build,
// naming both streams.
TEST_F(PluginTest, refuses_a_binding_on_another_stream_than_its_source) {
  auto msg = refusal_of(plugin().connector(order_binding("orders"), mock("a", "orders.shipped")));
  EXPECT_NE(msg.find("binding 'orders' is declared on stream 'orders.placed' but its source "
                     "consumes stream 'orders.shipped'"),
            std::string::npos)
      << msg;
}

TEST(ValidateConnectors, warns_when_more_than_one_shard_is_readable) {
  auto workflows = connector_workflows();
  std::vector<ConnectorSpec> specs{{order_binding(), mock("a"), {}}};
  ValidationContext ctx{&workflows, true, {}, 2, {}};
  auto report = validate_connectors(specs, ctx);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("binding 'orders' dedupes on broker coordinates, which is "
                                    "shard-local, and 2 shards are readable"),
            std::string::npos);
  ctx.readable_shards = 1;
  EXPECT_TRUE(validate_connectors(specs, ctx).warnings.empty());
}

TEST_F(PluginTest, warns_naming_a_pending_plugin_migration) {
  ASSERT_TRUE(db().exec("DELETE FROM harvest_schema_migrations WHERE set_name = 'connector'"));
  ASSERT_TRUE(db().exec("DROP TABLE harvest_connector_dead_letters"));
  log::LogCapture capture;
  auto app = plugin()
                 .connector(order_binding(), mock("a"))
                 .start_idempotency_window(std::chrono::hours(48))
                 .build();
  EXPECT_TRUE(capture.contains({"connector bindings 'orders'", "connector/0001_dead_letters",
                                "pending", "harvest migrate"}));
}

TEST_F(PluginTest, the_app_consumes_to_completion_with_the_postgres_sink) {
  auto source = mock("a");
  for (int o = 0; o < 20; ++o) source->push_kafka(o % 2, o / 2, order_json(std::to_string(o)));
  source->push_kafka(0, 10, "poison");
  auto app = plugin()
                 .connector_with_config(order_binding(), source,
                                        connector::ConnectorRuntimeConfig{.idle_backoff = 10ms})
                 .worker(engine::WorkerConfig{.concurrency = 2, .poll_interval = 10ms})
                 .start_idempotency_window(std::chrono::hours(48))
                 .build();
  app->start();
  ASSERT_TRUE(eventually([&] {
    return scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'") ==
           20;
  }));
  ASSERT_TRUE(eventually([&] { return source->committed(0) == 11; }));
  EXPECT_EQ(source->committed(1), 10);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_connector_dead_letters WHERE reason = "
                   "'undecodable'"),
            1);
  app->stop();
}

}  // namespace
}  // namespace harvest::plugin

namespace harvest::plugin {
namespace {

// Issue 13 item 4 (the chapter: "if you would rather not have the table at
// all"): bindings that hand poison to the broker need no connector
// dead-letter table, and the pending-migration warning speaks only for the
// bindings that write it.
TEST(PluginValidation, pending_table_migration_warns_only_for_bindings_that_write_the_table) {
  auto registry = connector_workflows();
  ValidationContext ctx{&registry, true, {}, 1, {"connector/0001_dead_letters"}};
  auto native_source = mock("n");
  native_source->dead_letter_destination("orders-dlq");
  auto native = order_binding("native");
  native.broker_native_dead_letter();
  std::vector<ConnectorSpec> only_native{{native, native_source, {}}};
  auto report = validate_connectors(only_native, ctx);
  EXPECT_TRUE(report.refusals.empty());
  for (const auto& w : report.warnings) {
    EXPECT_EQ(w.find("retried forever"), std::string::npos) << w;
  }
  std::vector<ConnectorSpec> mixed{{native, native_source, {}},
                                   {order_binding("table"), mock("t"), {}}};
  report = validate_connectors(mixed, ctx);
  std::vector<std::string> pending;
  for (const auto& w : report.warnings) {
    if (w.find("need migration") != std::string::npos) pending.push_back(w);
  }
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_NE(pending[0].find("connector bindings 'table' need migration"), std::string::npos)
      << pending[0];
  EXPECT_EQ(pending[0].find("'native'"), std::string::npos) << pending[0];
}

class PluginTableTest : public harvest::testing::PgTest {};

TEST_F(PluginTableTest, broker_native_bindings_alone_do_not_create_the_dead_letter_table) {
  // The test database comes migrated: take the connector set back out.
  ASSERT_TRUE(db().exec("DROP TABLE harvest_connector_dead_letters"));
  ASSERT_TRUE(db().exec("DELETE FROM harvest_schema_migrations WHERE set_name = 'connector'"));
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  source->subscription("n");
  source->dead_letter_destination("orders-dlq");
  auto binding = order_binding("native");
  binding.broker_native_dead_letter();
  engine::EngineConfig config;
  config = engine_config(config);
  config.profile = engine::Profile::kTest;
  auto app = HarvestPlugin()
                 .engine_config(config)
                 .workflows(connector_workflows())
                 .connector(binding, source)
                 .build();
  EXPECT_EQ(scalar("SELECT count(*) FROM pg_tables WHERE tablename = "
                   "'harvest_connector_dead_letters'"),
            0);
  // A poison message is handed back to the broker, never written anywhere.
  source->push_sqs("{not json");
  auto pass = app->runtime("native").run_once();
  ASSERT_TRUE(pass) << pass.error().message;
  EXPECT_EQ(source->abandoned().size(), 1u) << "handed back for the broker's redrive";
  EXPECT_TRUE(source->acked().empty());
  EXPECT_TRUE(app->warnings().empty() ||
              std::ranges::none_of(app->warnings(), [](const std::string& w) {
                return w.find("need migration") != std::string::npos;
              }));
}

}  // namespace
}  // namespace harvest::plugin

namespace harvest::plugin {
namespace {

// ENG-2: in split mode (a separate harvest database) the
// dev profile applies the connector set there, beside the engine's tables,
// and the sink writes there; the application's database is left alone.
TEST(PluginSplitMode, the_connector_table_lands_in_the_harvest_database) {
  const std::string admin = harvest::testing::admin_url();
  auto conn = store::Connection::open(admin);
  ASSERT_TRUE(conn);
  const std::string suffix = new_uuid().substr(0, 8);
  const std::string app_db = "harvest_app_" + suffix, harvest_db = "harvest_own_" + suffix;
  ASSERT_TRUE((*conn)->exec("CREATE DATABASE " + app_db));
  ASSERT_TRUE((*conn)->exec("CREATE DATABASE " + harvest_db));
  {
    engine::EngineConfig config;
    config.database_url = harvest::testing::with_database(admin, app_db);
    config.harvest_database_url = harvest::testing::with_database(admin, harvest_db);
    config.profile = engine::Profile::kDev;
    auto source = mock("s");
    auto app = HarvestPlugin()
                   .engine_config(config)
                   .workflows(connector_workflows())
                   .connector(order_binding("orders"), source)
                   .build();
    source->push_kafka(0, 0, "{not json");
    auto pass = app->runtime("orders").run_once();
    ASSERT_TRUE(pass) << pass.error().message;
    EXPECT_EQ(pass->dead_lettered, 1u);
    auto tables = [&](const std::string& db) {
      auto c = store::Connection::open(harvest::testing::with_database(admin, db));
      EXPECT_TRUE(c);
      auto r = (*c)->exec(
          "SELECT coalesce(string_agg(tablename, ',' ORDER BY tablename), '') FROM pg_tables "
          "WHERE tablename IN ('harvest_connector_dead_letters', 'harvest_workflow_executions')");
      EXPECT_TRUE(r);
      return r ? r->get(0, 0) : std::string();
    };
    EXPECT_EQ(tables(harvest_db), "harvest_connector_dead_letters,harvest_workflow_executions");
    EXPECT_EQ(tables(app_db), "");
    auto c = store::Connection::open(harvest::testing::with_database(admin, harvest_db));
    ASSERT_TRUE(c);
    auto letters = (*c)->exec("SELECT count(*) FROM harvest_connector_dead_letters");
    ASSERT_TRUE(letters);
    EXPECT_EQ(letters->get(0, 0), "1");
  }
  (void)(*conn)->exec("DROP DATABASE IF EXISTS " + app_db + " WITH (FORCE)");
  (void)(*conn)->exec("DROP DATABASE IF EXISTS " + harvest_db + " WITH (FORCE)");
}

}  // namespace
}  // namespace harvest::plugin
