#include "support/pg_fixture.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <thread>

#include <harvest/common/ids.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/migrations.hpp>

namespace harvest::testing {

std::string admin_url() {
  const char* url = std::getenv("HARVEST_TEST_DATABASE_URL");
  if (!url) {
    ADD_FAILURE() << "HARVEST_TEST_DATABASE_URL is not set: run the tests through scripts/test.sh, "
                     "which starts a throw-away PostgreSQL cluster";
    return {};
  }
  return url;
}

std::string with_database(const std::string& url, const std::string& db) {
  auto slash = url.rfind('/');
  auto q = url.find('?', slash);
  return url.substr(0, slash + 1) + db + (q == std::string::npos ? "" : url.substr(q));
}

namespace {

// A migrated template database, created once per cluster and migration content.
std::string ensure_template(store::Connection& admin) {
  std::string digest_input;
  for (const auto& set : plugin::all_migration_sets()) {
    for (const auto& m : set.migrations) digest_input += set.name + m.name + m.sql;
  }
  std::string name = "harvest_tmpl_" + sha256_hex(digest_input).substr(0, 12);
  (void)admin.exec("SELECT pg_advisory_lock(4242)");
  auto exists = admin.exec("SELECT 1 FROM pg_database WHERE datname = $1", {name});
  if (exists && exists->empty()) {
    std::string building = name + "_build";
    (void)admin.exec("DROP DATABASE IF EXISTS " + store::quote_ident(building));
    auto created = admin.exec("CREATE DATABASE " + store::quote_ident(building));
    EXPECT_TRUE(created) << created.error().message;
    {
      auto conn = store::Connection::open(with_database(admin_url(), building));
      EXPECT_TRUE(conn) << conn.error().message;
      auto applied = store::apply_migrations(**conn, plugin::all_migration_sets());
      EXPECT_TRUE(applied) << applied.error().message;
    }
    auto renamed = admin.exec(fmt::format("ALTER DATABASE {} RENAME TO {}",
                                          store::quote_ident(building), store::quote_ident(name)));
    EXPECT_TRUE(renamed) << renamed.error().message;
  }
  (void)admin.exec("SELECT pg_advisory_unlock(4242)");
  return name;
}

}  // namespace

// Clones the migrated template into a new database named `name`.
void clone_template(const std::string& name) {
  auto conn = store::Connection::open(admin_url());
  ASSERT_TRUE(conn) << conn.error().message;
  std::string tmpl = ensure_template(**conn);
  // CREATE DATABASE ... TEMPLATE fails while another session is connected to
  // the template; only the builder ever connects, so retry briefly.
  Result<store::PgResult> created;
  for (int i = 0; i < 50; ++i) {
    created = (*conn)->exec(fmt::format("CREATE DATABASE {} TEMPLATE {}", store::quote_ident(name),
                                        store::quote_ident(tmpl)));
    if (created) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(created) << created.error().message;
}

std::string PgTest::extra_database() {
  std::string name = "harvest_t_" + new_uuid().substr(0, 8);
  clone_template(name);
  extra_dbs_.push_back(name);
  return with_database(admin_url(), name);
}

void PgTest::SetUp() {
  std::string admin = admin_url();
  ASSERT_FALSE(admin.empty());
  db_name_ = "harvest_t_" + new_uuid().substr(0, 8);
  clone_template(db_name_);
  if (HasFatalFailure()) return;
  db_url_ = with_database(admin, db_name_);
  auto own = store::Connection::open(db_url_);
  ASSERT_TRUE(own) << own.error().message;
  conn_ = std::move(*own);
}

void PgTest::TearDown() {
  conn_.reset();
  if (db_name_.empty()) return;
  if (auto conn = store::Connection::open(admin_url())) {
    (void)(*conn)->exec(
        fmt::format("DROP DATABASE IF EXISTS {} WITH (FORCE)", store::quote_ident(db_name_)));
  }
}

store::Connection& PgTest::db() {
  return *conn_;
}

long long PgTest::scalar(const std::string& sql, const store::Params& params) {
  auto r = conn_->exec(sql, params);
  EXPECT_TRUE(r) << sql << ": " << r.error().message;
  if (!r || r->empty() || r->is_null(0, 0)) return 0;
  return std::stoll(r->get(0, 0));
}

std::string PgTest::text(const std::string& sql, const store::Params& params) {
  auto r = conn_->exec(sql, params);
  EXPECT_TRUE(r) << sql << ": " << r.error().message;
  if (!r || r->empty() || r->is_null(0, 0)) return {};
  return r->get(0, 0);
}

engine::EngineConfig PgTest::engine_config(engine::EngineConfig config) const {
  config.database_url = db_url_;
  if (!config.profile) config.profile = engine::Profile::kTest;
  // Behind a pooler: scripts/test.sh runs the postgres, kafka and sqs suites
  // a second time with HARVEST_TEST_THROUGH_POOLER set to PgBouncer's URL
  // (transaction pooling): every engine a test opens then reaches its shards
  // through the pooler, LISTENing on the direct URLs, as a production
  // deployment behind PgBouncer would. The test's own checks (db(),
  // scalar()) stay direct.
  const char* pooled = std::getenv("HARVEST_TEST_THROUGH_POOLER");
  if (pooled && *pooled && !config.pooler) {
    auto through = [&](const std::string& direct) {
      const auto slash = direct.rfind('/');
      const auto q = direct.find('?', slash);
      return with_database(
          pooled,
          direct.substr(slash + 1, q == std::string::npos ? std::string::npos : q - slash - 1));
    };
    config.pooler = engine::Pooler::kTransaction;
    config.listen_urls.clear();
    if (config.shard_urls.empty()) {
      config.listen_urls.push_back(db_url_);
      config.database_url = through(db_url_);
    } else {
      for (auto& url : config.shard_urls) {
        config.listen_urls.push_back(url);
        url = through(url);
      }
    }
  }
  return config;
}

std::unique_ptr<engine::Engine> PgTest::open_engine(engine::WorkflowRegistry workflows,
                                                    engine::EngineConfig config) {
  auto e = engine::Engine::open(engine_config(std::move(config)), std::move(workflows));
  EXPECT_TRUE(e) << e.error().message;
  return e ? std::move(*e) : nullptr;
}

bool PgTest::eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace harvest::testing
