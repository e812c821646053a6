// ENG-2: with no database URL in the dev profile, harvest runs a private
// PostgreSQL cluster under its own data directory, reused across runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>

#include "support/private_cluster.hpp"
#include "support/scoped_env.hpp"
#include <harvest/engine/engine.hpp>
#include <harvest/store/dev_cluster.hpp>
#include <harvest/store/pg.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::store {
namespace {

namespace fs = std::filesystem;

class DevClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("harvest-devcluster-" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    port_ = harvest::testing::free_port();
  }
  void TearDown() override {
    auto bindir = postgres_bindir();
    if (bindir && fs::exists(dir_ / "pg" / "postmaster.pid")) {
      std::string cmd = (::geteuid() == 0 ? "runuser -u postgres -- " : "") +
                        (*bindir / "pg_ctl").string() + " -D " + (dir_ / "pg").string() +
                        " -m immediate stop >/dev/null 2>&1";
      (void)std::system(cmd.c_str());
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  int port_ = 0;
};

TEST_F(DevClusterTest, creates_starts_and_reuses_a_private_cluster) {
  auto url = ensure_dev_cluster({dir_ / "pg", port_});
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(*url, "postgresql://harvest@127.0.0.1:" + std::to_string(port_) + "/harvest");
  EXPECT_TRUE(fs::exists(dir_ / "pg" / "PG_VERSION"));
  {
    auto conn = Connection::open(*url);
    ASSERT_TRUE(conn) << conn.error().message;
    ASSERT_TRUE((*conn)->exec("CREATE TABLE kept (v int)"));
  }
  // A second call (a later run) reuses the same cluster and its data.
  auto again = ensure_dev_cluster({dir_ / "pg", port_});
  ASSERT_TRUE(again) << again.error().message;
  auto conn = Connection::open(*again);
  ASSERT_TRUE(conn);
  auto r = (*conn)->exec("SELECT count(*) FROM kept");
  EXPECT_TRUE(r) << "the table survives: the cluster was reused, not recreated";
}

TEST_F(DevClusterTest, the_engine_in_dev_profile_with_no_url_uses_it_and_migrates) {
  ::setenv("HARVEST_DATA_DIR", (dir_ / "pg").c_str(), 1);
  ::setenv("HARVEST_DEV_PG_PORT", std::to_string(port_).c_str(), 1);
  ::unsetenv("HARVEST_DATABASE_URL");
  ::unsetenv("HARVEST_HARVEST_DATABASE_URL");
  ::unsetenv("HARVEST_SHARD_URLS");
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;
  auto e = engine::Engine::open(config, {});
  ::unsetenv("HARVEST_DATA_DIR");
  ::unsetenv("HARVEST_DEV_PG_PORT");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ((*e)->mode(), engine::DeploymentMode::kDevCluster);
  auto conn = (*e)->pool().acquire();
  ASSERT_TRUE(conn);
  auto r = (*conn)->exec("SELECT count(*) FROM harvest_schema_migrations");
  ASSERT_TRUE(r);
  EXPECT_GE(std::stoi(r->get(0, 0)), 2);
}

TEST(EngineOpen, refuses_with_a_clear_error_when_no_database_is_configured_outside_dev) {
  ::unsetenv("HARVEST_DATABASE_URL");
  ::unsetenv("HARVEST_HARVEST_DATABASE_URL");
  ::unsetenv("HARVEST_SHARD_URLS");
  engine::EngineConfig config;
  config.profile = engine::Profile::kProd;
  auto e = engine::Engine::open(config, {});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::kConfig);
  EXPECT_NE(e.error().message.find("HARVEST_DATABASE_URL"), std::string::npos);
}

TEST(EngineOpen, an_unknown_profile_is_refused_naming_the_value_and_the_choices) {
  for (auto p : {engine::Profile::kDev, engine::Profile::kTest, engine::Profile::kProd}) {
    auto parsed = engine::parse_profile(engine::to_string(p));
    ASSERT_TRUE(parsed) << engine::to_string(p);
    EXPECT_EQ(*parsed, p);
  }
  // Only the environment can spell a profile that does not exist; it is
  // refused before any database is reached.
  testing::ScopedEnv env;
  env.set("HARVEST_PROFILE", "production");
  engine::EngineConfig config;
  config.database_url = "postgresql://nobody@127.0.0.1:1/none";
  auto e = engine::Engine::open(config, {});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::kConfig);
  EXPECT_EQ(e.error().message,
            "profile 'production' (HARVEST_PROFILE) is not one of: dev, test, prod");
}

}  // namespace
}  // namespace harvest::store
