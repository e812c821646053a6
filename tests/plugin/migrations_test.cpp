// ENG-1: migrations apply once, are idempotent, and pending ones are reported.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

#include "support/pg_fixture.hpp"
#include <harvest/cli/cli.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/plugin/migrations.hpp>

namespace harvest {
namespace {

// A brand-new empty database (not the migrated template).
class MigrationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    admin_ = testing::admin_url();
    ASSERT_FALSE(admin_.empty());
    auto admin = store::Connection::open(admin_);
    ASSERT_TRUE(admin);
    name_ = "harvest_m_" + new_uuid().substr(0, 8);
    ASSERT_TRUE((*admin)->exec("CREATE DATABASE " + name_));
    url_ = testing::with_database(admin_, name_);
    auto c = store::Connection::open(url_);
    ASSERT_TRUE(c);
    conn_ = std::move(*c);
  }
  void TearDown() override {
    conn_.reset();
    if (auto admin = store::Connection::open(admin_)) {
      (void)(*admin)->exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    }
  }
  long long count(const std::string& sql) {
    auto r = conn_->exec(sql);
    EXPECT_TRUE(r) << r.error().message;
    return std::stoll(r->get(0, 0));
  }
  std::string admin_, name_, url_;
  std::unique_ptr<store::Connection> conn_;
};

TEST_F(MigrationsTest, apply_once_then_nothing_pending_and_reapply_is_a_no_op) {
  auto sets = plugin::all_migration_sets();
  size_t total = 0;
  for (const auto& s : sets) total += s.migrations.size();
  auto pending = store::pending_migrations(*conn_, sets);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->size(), total);
  EXPECT_EQ(pending->front().label(), "engine/0001_core");

  auto applied = store::apply_migrations(*conn_, sets);
  ASSERT_TRUE(applied) << applied.error().message;
  EXPECT_EQ(applied->size(), total);
  EXPECT_EQ(count("SELECT count(*) FROM harvest_schema_migrations"), static_cast<long long>(total));
  EXPECT_EQ(count("SELECT count(*) FROM pg_tables WHERE tablename = 'harvest_workflow_executions'"),
            1);

  auto again = store::apply_migrations(*conn_, sets);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
  EXPECT_EQ(count("SELECT count(*) FROM harvest_schema_migrations"), static_cast<long long>(total));
  auto none = store::pending_migrations(*conn_, sets);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(MigrationsTest, a_new_migration_is_reported_pending_and_applied_alone) {
  auto sets = plugin::all_migration_sets();
  ASSERT_TRUE(store::apply_migrations(*conn_, sets));
  store::MigrationSet extra{"extra", {{1, "widgets", "CREATE TABLE widgets (id int)"}}};
  sets.push_back(extra);
  auto pending = store::pending_migrations(*conn_, sets);
  ASSERT_TRUE(pending);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().label(), "extra/0001_widgets");
  auto applied = store::apply_migrations(*conn_, sets);
  ASSERT_TRUE(applied);
  ASSERT_EQ(applied->size(), 1u);
}

TEST_F(MigrationsTest, engine_open_outside_dev_warns_naming_each_pending_migration) {
  log::LogCapture capture;
  engine::EngineConfig config;
  config.database_url = url_;
  config.profile = "prod";
  auto e = engine::Engine::open(config, {});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_TRUE(capture.contains({"pending migration", "engine/0001_core"}));
  EXPECT_FALSE((*e)->pending_migrations_at_open().empty());
  EXPECT_EQ(count("SELECT count(*) FROM pg_tables WHERE tablename = 'harvest_workflow_executions'"),
            0);
}

TEST_F(MigrationsTest, engine_open_in_dev_profile_applies_them) {
  engine::EngineConfig config;
  config.database_url = url_;
  config.profile = "dev";
  auto e = engine::Engine::open(config, {});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_TRUE((*e)->pending_migrations_at_open().empty());
  EXPECT_EQ(count("SELECT count(*) FROM pg_tables WHERE tablename = 'harvest_workflow_executions'"),
            1);
}

TEST_F(MigrationsTest, harvest_migrate_cli_applies_and_reports) {
  std::ostringstream out, err;
  const char* dry[] = {"harvest", "--database-url", url_.c_str(), "migrate", "--dry-run"};
  EXPECT_EQ(cli::run_cli(5, dry, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("pending  engine/0001_core"), std::string::npos) << out.str();
  out.str("");
  const char* run[] = {"harvest", "--database-url", url_.c_str(), "migrate"};
  EXPECT_EQ(cli::run_cli(4, run, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("applied  engine/0001_core"), std::string::npos) << out.str();
  out.str("");
  EXPECT_EQ(cli::run_cli(4, run, out, err), 0);
  EXPECT_EQ(out.str(), "up to date\n");
  const char* bad[] = {"harvest", "--database-url", "postgresql://x@127.0.0.1:1/none", "migrate"};
  std::ostringstream err2;
  EXPECT_EQ(cli::run_cli(4, bad, out, err2), 1);
  EXPECT_NE(err2.str().find("error: cannot connect"), std::string::npos) << err2.str();
}

// ENG-1/ENG-2 (issue 13 item 8): `harvest migrate` applies and reports every
// set — the engine's and the connector's — and the environment's separate
// harvest database takes precedence over the application's.
TEST_F(MigrationsTest, harvest_migrate_applies_every_set_to_the_harvest_database) {
  auto admin = store::Connection::open(admin_);
  ASSERT_TRUE(admin);
  const std::string app_db = "harvest_app_" + new_uuid().substr(0, 8);
  ASSERT_TRUE((*admin)->exec("CREATE DATABASE " + app_db));
  const std::string app_url = testing::with_database(admin_, app_db);
  ::setenv("HARVEST_DATABASE_URL", app_url.c_str(), 1);
  ::setenv("HARVEST_HARVEST_DATABASE_URL", url_.c_str(), 1);
  std::ostringstream out, err;
  const char* run[] = {"harvest", "migrate"};
  EXPECT_EQ(cli::run_cli(2, run, out, err), 0) << err.str();
  ::unsetenv("HARVEST_DATABASE_URL");
  ::unsetenv("HARVEST_HARVEST_DATABASE_URL");
  for (const auto& set : plugin::all_migration_sets()) {
    for (const auto& m : set.migrations) {
      const std::string label = fmt::format("{}/{:04d}_{}", set.name, m.version, m.name);
      EXPECT_NE(out.str().find("applied  " + label), std::string::npos) << label << " in:\n"
                                                                        << out.str();
    }
  }
  EXPECT_EQ(count("SELECT count(*) FROM pg_tables WHERE tablename IN "
                  "('harvest_workflow_executions', 'harvest_connector_dead_letters')"),
            2);
  auto app = store::Connection::open(app_url);
  ASSERT_TRUE(app);
  auto none = (*app)->exec("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'harvest_%'");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->get(0, 0), "0") << "nothing lands in the application's database";
  (void)(*admin)->exec("DROP DATABASE IF EXISTS " + app_db + " WITH (FORCE)");
}

}  // namespace
}  // namespace harvest
