// Test support: a fresh, fully migrated database per test on the test
// PostgreSQL cluster that scripts/test.sh starts ($HARVEST_TEST_DATABASE_URL,
// an admin URL). Each test gets its own database cloned from a migrated
// template, so tests are independent and can run in parallel processes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <harvest/engine/engine.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::testing {

// The admin URL of the test cluster; skips nothing: a missing URL fails the
// test with a message saying to run scripts/test.sh.
std::string admin_url();

// How many times longer a bound on recovery time may be in this build. The
// plain build asserts the product's figure (a store outage heals within
// 10 s); under ThreadSanitizer every thread runs several times slower and the
// question there is races, not seconds, so such a bound is stretched by this
// factor rather than the test being left out of the sanitizer run.
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 4;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

// How many times smaller a property or fuzz test's workload is in this
// build: the ThreadSanitizer pass runs them for races, at a tenth of their
// size, so they fit its budget; the plain build runs them whole.
#if defined(__SANITIZE_THREAD__)
inline constexpr size_t kFuzzDivisor = 10;
#else
inline constexpr size_t kFuzzDivisor = 1;
#endif

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Creates one more migrated database for this test (dropped at teardown)
  // and returns its URL: a second shard.
  std::string extra_database();
  // URL of this test's own database.
  const std::string& db_url() const { return db_url_; }
  // A direct connection to this test's database.
  store::Connection& db();
  // Runs `sql` and returns the first column of the first row as an integer.
  long long scalar(const std::string& sql, const store::Params& params = {});
  std::string text(const std::string& sql, const store::Params& params = {});

  // Opens an engine over this test's database.
  std::unique_ptr<engine::Engine> open_engine(engine::WorkflowRegistry workflows,
                                              engine::EngineConfig config = {});
  // `config` pointed at this test's database (Profile::kTest unless set):
  // for an engine a test builds through the plugin rather than open_engine.
  // In the pooler pass it reaches the database through PgBouncer, as every
  // engine open_engine opens does (see there).
  engine::EngineConfig engine_config(engine::EngineConfig config = {}) const;

  // Waits until `pred` holds or `timeout` passes; returns whether it held.
  static bool eventually(const std::function<bool()>& pred,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20));

  std::vector<std::string> extra_dbs_;
  std::string db_name_;
  std::string db_url_;
  std::unique_ptr<store::Connection> conn_;
};

// Replaces the database name of a postgres:// URL.
std::string with_database(const std::string& url, const std::string& db);

// A run's status as harvest shows it ($1 = execution id): a pending or
// waiting run that a worker holds (a lease row) is running.
inline constexpr const char* kStatusById =
    "SELECT CASE WHEN e.status IN ('pending', 'waiting') AND EXISTS (SELECT 1 FROM "
    "harvest_run_leases l WHERE l.execution_id = e.id) THEN 'running' ELSE e.status END "
    "FROM harvest_workflow_executions e WHERE e.id = $1";

}  // namespace harvest::testing
