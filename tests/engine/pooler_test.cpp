// harvest behind a connection pooler in transaction mode — a real PgBouncer
// (scripts/services/pgbouncer.sh, started by scripts/test.sh) between the
// engine and PostgreSQL. With EngineConfig::pooler Pooler::kTransaction every
// statement is self-contained: no named prepared statements, no session
// settings, no session advisory lock, and LISTEN only on a direct URL (else
// idle workers poll).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

#include "support/pg_fixture.hpp"
#include "support/scoped_env.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/migrations.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

// The test cluster's admin URL through the pooler.
std::string pooler_admin_url() {
  const char* url = std::getenv("HARVEST_TEST_PGBOUNCER_URL");
  if (url == nullptr || *url == '\0') {
    ADD_FAILURE() << "HARVEST_TEST_PGBOUNCER_URL is not set: run the tests through "
                     "scripts/test.sh, which starts PgBouncer in front of the test PostgreSQL";
    return {};
  }
  return url;
}

class PoolerTest : public testing::PgTest {
 protected:
  // This test's database, reached through PgBouncer.
  std::string pooled_url() { return testing::with_database(pooler_admin_url(), db_name_); }

  EngineConfig pooled_config() {
    EngineConfig config;
    config.database_url = pooled_url();
    config.pooler = Pooler::kTransaction;
    return config;
  }

  static WorkflowRegistry registry() {
    WorkflowRegistry r;
    r.add("pooled", [](WorkflowContext& ctx, Json in) {
      const int doubled = ctx.step("double", [&] { return in["n"].get<int>() * 2; });
      auto go = ctx.wait_signal("go", 60s);
      return Json{{"doubled", doubled}, {"go", go.value_or(nullptr)}};
    });
    return r;
  }
};

TEST_F(PoolerTest, an_unknown_pooler_mode_is_refused_naming_the_setting) {
  for (Pooler p : {Pooler::kNone, Pooler::kTransaction}) {
    auto parsed = parse_pooler(to_string(p));
    ASSERT_TRUE(parsed) << to_string(p);
    EXPECT_EQ(*parsed, p);
  }
  // Only the environment can spell a mode that does not exist.
  EngineConfig config = pooled_config();
  config.pooler.reset();
  auto e = [&] {
    testing::ScopedEnv env;
    env.set("HARVEST_DATABASE_POOLER", "session-ish");
    return Engine::open(config, registry());
  }();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::kConfig);
  EXPECT_EQ(e.error().message,
            "pooler 'session-ish' (HARVEST_DATABASE_POOLER) is not one of: none, transaction");
  config.pooler = Pooler::kTransaction;
  config.listen_urls = {db_url(), db_url()};
  auto two = Engine::open(config, registry());
  ASSERT_FALSE(two) << "two LISTEN URLs for one shard";
  EXPECT_NE(two.error().message.find("listen"), std::string::npos) << two.error().message;
}

// Several migrators through the pooler at once: each migration is applied
// once, under a lock held by its own transaction (a session lock taken
// through a transaction pooler stays on whichever server connection it
// landed on).
TEST_F(PoolerTest, migrations_apply_once_through_the_pooler_from_concurrent_migrators) {
  auto admin = store::Connection::open(testing::admin_url());
  ASSERT_TRUE(admin);
  const std::string name = "harvest_p_" + new_uuid().substr(0, 8);
  ASSERT_TRUE((*admin)->exec("CREATE DATABASE " + name));
  extra_dbs_.push_back(name);
  const std::string url = testing::with_database(pooler_admin_url(), name);
  auto sets = plugin::all_migration_sets();
  size_t total = 0;
  for (const auto& s : sets) total += s.migrations.size();
  std::atomic<size_t> applied{0};
  std::atomic<int> failures{0};
  std::vector<std::jthread> migrators;
  for (int i = 0; i < 3; ++i) {
    migrators.emplace_back([&] {
      auto conn = store::Connection::open(url);
      if (!conn) {
        ++failures;
        return;
      }
      auto r = store::apply_migrations(**conn, sets);
      if (!r) {
        ADD_FAILURE() << r.error().message;
        ++failures;
        return;
      }
      applied += r->size();
    });
  }
  migrators.clear();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(applied.load(), total) << "every migration applied exactly once";
  auto direct = store::Connection::open(testing::with_database(testing::admin_url(), name));
  ASSERT_TRUE(direct);
  auto ledger = (*direct)->exec("SELECT count(*) AS n FROM harvest_schema_migrations");
  ASSERT_TRUE(ledger);
  EXPECT_EQ(static_cast<size_t>(ledger->get_int(0, "n")), total);
}

// Starts from several threads (keyed, then every one repeated), signals and
// completions, all through PgBouncer; no LISTEN URL, so the worker polls.
TEST_F(PoolerTest,
       starts_signals_and_completions_keep_every_guarantee_through_transaction_pooling) {
  auto engine = Engine::open(pooled_config(), registry());
  ASSERT_TRUE(engine) << engine.error().message;
  constexpr int kThreads = 4, kPerThread = 50;
  std::atomic<int> started{0}, replays{0}, errors{0};
  auto start_all = [&] {
    std::vector<std::jthread> starters;
    for (int t = 0; t < kThreads; ++t) {
      starters.emplace_back([&, t] {
        std::vector<StartRequest> batch;
        for (int i = 0; i < kPerThread; ++i) {
          const int n = t * kPerThread + i;
          batch.push_back({.workflow = "pooled",
                           .workflow_id = "run-" + std::to_string(n),
                           .input = Json{{"n", n}},
                           .idempotency_key = "key-" + std::to_string(n)});
        }
        // Half as one group commit, half one by one.
        for (auto& r : (*engine)->start_batch({batch.begin(), batch.begin() + kPerThread / 2})) {
          if (!r) {
            ADD_FAILURE() << r.error().message;
            ++errors;
          } else {
            ++(r->kind == StartOutcomeKind::kStarted ? started : replays);
          }
        }
        for (auto it = batch.begin() + kPerThread / 2; it != batch.end(); ++it) {
          auto r = (*engine)->start(*it);
          if (!r) {
            ADD_FAILURE() << r.error().message;
            ++errors;
          } else {
            ++(r->kind == StartOutcomeKind::kStarted ? started : replays);
          }
        }
      });
    }
  };
  start_all();
  start_all();
  constexpr int kRuns = kThreads * kPerThread;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(started.load(), kRuns);
  EXPECT_EQ(replays.load(), kRuns) << "every repeat resolved to its run";

  Worker worker(**engine, {.concurrency = 8, .poll_interval = 50ms});
  worker.start();
  for (int n = 0; n < kRuns; ++n) {
    auto s = (*engine)->signal(
        {.target = {.workflow = "pooled", .workflow_id = "run-" + std::to_string(n)},
         .name = "go",
         .payload = Json{{"n", n}},
         .idempotency_key = "go-" + std::to_string(n)});
    ASSERT_TRUE(s) << s.error().message;
  }
  EXPECT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
                   "'completed'") == kRuns;
      },
      60s))
      << scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")
      << " of " << kRuns << " completed";
  worker.stop();
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), kRuns);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE "
                   "(output->>'doubled')::int = 2 * (input->>'n')::int "
                   "AND (output->'go'->>'n')::int = (input->>'n')::int"),
            kRuns)
      << "each run got its own input and its own signal";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), kRuns);
}

// With a direct LISTEN URL, a start made by another engine wakes this
// engine's idle worker long before its (deliberately slow) poll would.
TEST_F(PoolerTest, a_direct_listen_url_wakes_idle_workers_behind_the_pooler) {
  EngineConfig config = pooled_config();
  config.listen_urls = {db_url()};
  auto engine = Engine::open(config, registry());
  ASSERT_TRUE(engine) << engine.error().message;
  auto other = Engine::open(pooled_config(), registry());
  ASSERT_TRUE(other) << other.error().message;
  Worker worker(**engine, {.concurrency = 2, .poll_interval = 30s});
  worker.start();
  std::this_thread::sleep_for(500ms);  // the worker is idle, its LISTEN connected
  const auto t0 = std::chrono::steady_clock::now();
  auto s = (*other)->start({.workflow = "pooled", .workflow_id = "wake", .input = Json{{"n", 1}}});
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(eventually(
      [&] {
        return scalar(
                   "SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'wake' AND status = 'waiting'") == 1;
      },
      10s))
      << "the NOTIFY of the other engine's start did not wake the worker";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  worker.stop();
}

}  // namespace
}  // namespace harvest::engine
