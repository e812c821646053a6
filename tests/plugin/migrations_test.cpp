// ENG-1: migrations apply once, are idempotent, and pending ones are reported.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

#include "support/pg_fixture.hpp"
#include <harvest/cli/cli.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/worker.hpp>
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
  config.profile = engine::Profile::kProd;
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
  config.profile = engine::Profile::kDev;
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

// ENG-1/ENG-2: `harvest migrate` applies and reports every
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

// Issue 35: schema v2 upgrades a populated v1 database in place. Runs in
// every state, written as the v1 engine wrote them (a WorkflowStarted event
// row per run, the output copied into WorkflowCompleted, foreign keys), are
// migrated, then resumed, signalled, replayed and purged by this engine; a
// start after the upgrade writes one row.
TEST_F(MigrationsTest, a_populated_v1_database_upgrades_to_v2_and_its_runs_go_on) {
  auto sets = plugin::all_migration_sets();
  auto v1 = sets;
  for (auto& set : v1) {
    if (set.name != "engine") continue;
    std::erase_if(set.migrations, [](const store::Migration& m) { return m.version >= 11; });
  }
  auto applied = store::apply_migrations(*conn_, v1);
  ASSERT_TRUE(applied) << applied.error().message;
  const std::string id = "00000000-0000-4000-8000-0000000000";
  ASSERT_TRUE(conn_->exec_script(fmt::format(
      "INSERT INTO harvest_workflow_executions (id, workflow_name, workflow_id, status, input, "
      "output, error, start_source, attempt, run_after, lease_owner, lease_expires_at, "
      "completed_at) VALUES "
      "('{0}01', 'legacy', 'pending', 'pending', '{{\"n\": 1}}', NULL, NULL, 'api', 1, now(), "
      " NULL, NULL, NULL), "
      "('{0}02', 'legacy', 'running', 'running', '{{\"n\": 2}}', NULL, NULL, 'api', 1, now(), "
      " 'a-worker-that-died', now() - interval '1 minute', NULL), "
      "('{0}03', 'legacy', 'waiting', 'waiting', '{{\"n\": 3, \"wait\": true}}', NULL, NULL, "
      " 'api', 1, now() + interval '1 hour', NULL, NULL, NULL), "
      "('{0}04', 'legacy', 'completed', 'completed', '{{\"n\": 4}}', '{{\"done\": 8}}', NULL, "
      " 'api', 1, now(), NULL, NULL, now() - interval '1 hour'), "
      "('{0}05', 'legacy', 'failed', 'failed', '{{\"n\": 5}}', NULL, 'boom', 'api', 3, now(), "
      " NULL, NULL, now() - interval '1 hour'), "
      "('{0}06', 'legacy', 'cancelled', 'cancelled', '{{\"n\": 6}}', NULL, NULL, 'api', 1, "
      " now(), NULL, NULL, now() - interval '1 hour'); "
      "INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload) "
      "SELECT id, NULL, 'WorkflowStarted', 'legacy', jsonb_build_object('start_source', 'api', "
      " 'start_source_ref', NULL) FROM harvest_workflow_executions; "
      "INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload) VALUES "
      "('{0}02', 0, 'StepCompleted', 'double', '99'), "
      "('{0}04', 0, 'StepCompleted', 'double', '8'), "
      "('{0}04', NULL, 'WorkflowCompleted', NULL, '{{\"done\": 8}}'), "
      "('{0}05', NULL, 'WorkflowFailed', NULL, '\"boom\"'); "
      "INSERT INTO harvest_engine_dead_letters (execution_id, workflow_name, workflow_id, error, "
      " attempts) VALUES ('{0}05', 'legacy', 'failed', 'boom', 3); "
      // v1 claims: one live on a run, a second key on that run (a keyed start
      // that resolved to a named run), one whose run retention deleted, and
      // one whose window lapsed.
      "INSERT INTO harvest_start_idempotency (workflow_name, idempotency_key, execution_id, "
      " expires_at, created_at) VALUES "
      "('legacy', 'k-live', '{0}04', now() + interval '1 hour', now() - interval '2 s'), "
      "('legacy', 'k-second', '{0}04', now() + interval '1 hour', now() - interval '1 s'), "
      "('legacy', 'k-gone', '{0}99', now() + interval '1 hour', now()), "
      "('legacy', 'k-old', '{0}01', now() - interval '1 minute', now() - interval '1 day');",
      id)));

  applied = store::apply_migrations(*conn_, sets);
  ASSERT_TRUE(applied) << applied.error().message;
  ASSERT_EQ(applied->size(), 9u);
  EXPECT_EQ(applied->front().label(), "engine/0011_one_row_start");
  EXPECT_EQ(applied->back().label(), "engine/0019_status_index");
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM harvest_run_leases WHERE execution_id = "
                              "'{}02' AND lease_owner = 'a-worker-that-died' AND "
                              "lease_expires_at < now() AND workflow_name = 'legacy'",
                              id)),
            1)
      << "the running run's lease moved to the run queue, expiry and all";
  EXPECT_EQ(count("SELECT count(*) FROM harvest_run_leases"), 1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM harvest_workflow_executions WHERE id = "
                              "'{}02' AND status = 'pending'",
                              id)),
            1)
      << "the execution row is back to pending; its lease row says it is held";
  EXPECT_EQ(count("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                  "'harvest_workflow_executions'::regclass AND attname IN ('lease_owner', "
                  "'lease_expires_at') AND NOT attisdropped"),
            0)
      << "a claim or a renewal no longer writes the execution row";
  EXPECT_EQ(count("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                  "'harvest_workflow_executions'::regclass AND attname = 'input' AND "
                  "atttypid = 'json'::regtype"),
            1)
      << "inputs are stored as json text";
  EXPECT_EQ(count("SELECT count(*) FROM pg_indexes WHERE tablename = "
                  "'harvest_workflow_executions' AND indexname IN ('harvest_executions_current', "
                  "'harvest_executions_runs') AND indexdef LIKE '%(workflow_id IS NOT NULL)%'"),
            2)
      << "a start without a workflow id adds no entry to the workflow-id indexes";
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM harvest_workflow_executions WHERE id = "
                              "'{}04' AND idempotency_key = 'k-live'",
                              id)),
            1)
      << "the first live claim moved onto its run";
  EXPECT_EQ(count("SELECT count(*) FROM harvest_start_claims WHERE idempotency_key IN "
                  "('k-second', 'k-gone')"),
            2)
      << "what could not move stays a claim row";
  EXPECT_EQ(count("SELECT count(*) FROM harvest_start_claims"), 2) << "the lapsed one is gone";
  EXPECT_EQ(count("SELECT count(*) FROM harvest_start_idempotency"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid IN "
                  "('harvest_workflow_events'::regclass, 'harvest_signals'::regclass, "
                  "'harvest_engine_dead_letters'::regclass, 'harvest_batch_items'::regclass)"),
            0)
      << "no foreign-key trigger on a hot-path insert";

  std::atomic<int> doubled{0};
  engine::WorkflowRegistry workflows;
  workflows.add("legacy", [&](engine::WorkflowContext& ctx, Json in) {
    const int v = ctx.step("double", [&] {
      ++doubled;
      return in["n"].get<int>() * 2;
    });
    Json out{{"done", v}};
    if (in.value("wait", false))
      out["go"] = ctx.wait_signal("go", std::chrono::seconds(30)).value();
    return out;
  });
  engine::EngineConfig config;
  config.database_url = url_;
  config.retention.with_max_age(std::chrono::seconds(0));
  auto opened = engine::Engine::open(config, std::move(workflows));
  ASSERT_TRUE(opened) << opened.error().message;
  auto& engine = **opened;

  auto signalled = engine.signal(
      {.target = {.execution_id = id + "03"}, .name = "go", .payload = Json{{"k", 1}}});
  ASSERT_TRUE(signalled) << signalled.error().message;
  ASSERT_TRUE(engine.replay_dead_letter(id + "05"));
  // Every v1 claim still holds its key, wherever it was kept; the lapsed one
  // starts a new run.
  for (const char* key : {"k-live", "k-second"}) {
    auto again =
        engine.start({.workflow = "legacy", .input = Json{{"n", 40}}, .idempotency_key = key});
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->kind, engine::StartOutcomeKind::kIdempotentReplay) << key;
    EXPECT_EQ(again->execution_id, id + "04") << key;
  }
  auto old_key =
      engine.start({.workflow = "legacy", .input = Json{{"n", 9}}, .idempotency_key = "k-old"});
  ASSERT_TRUE(old_key) << old_key.error().message;
  EXPECT_EQ(old_key->kind, engine::StartOutcomeKind::kStarted);
  auto fresh =
      engine.start({.workflow = "legacy", .workflow_id = "after", .input = Json{{"n", 7}}});
  ASSERT_TRUE(fresh) << fresh.error().message;
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = "
                              "'{}'",
                              *fresh->execution_id)),
            0)
      << "a v2 start is one row";

  engine::Worker worker(engine, {.concurrency = 1});
  for (int i = 0; i < 6; ++i) {
    auto ran = worker.run_one();
    ASSERT_TRUE(ran && *ran) << "run " << i;
  }
  auto ran = worker.run_one();
  ASSERT_TRUE(ran);
  EXPECT_FALSE(*ran) << "nothing else is runnable";
  EXPECT_EQ(doubled.load(), 5) << "the step the dead worker recorded is replayed, not re-run";

  auto view = [&](const std::string& execution) {
    auto v = engine.get_execution(execution);
    EXPECT_TRUE(v) << execution;
    return v ? *v : engine::ExecutionView{};
  };
  auto kinds = [](const engine::ExecutionView& v) {
    std::vector<std::string> out;
    for (const auto& h : v.history) out.push_back(h.kind);
    return out;
  };
  const auto running = view(id + "02");
  EXPECT_EQ(running.status, "completed");
  EXPECT_EQ(running.output, (Json{{"done", 99}}));
  EXPECT_EQ(kinds(running),
            (std::vector<std::string>{"WorkflowStarted", "StepCompleted", "WorkflowCompleted"}));
  EXPECT_NE(running.history.front().id, 0) << "the v1 event row, not a second one";
  EXPECT_EQ(running.history.back().payload, (Json{{"done", 99}}));
  const auto waiting = view(id + "03");
  EXPECT_EQ(waiting.output, (Json{{"done", 6}, {"go", {{"k", 1}}}}));
  const auto completed = view(id + "04");
  EXPECT_EQ(kinds(completed),
            (std::vector<std::string>{"WorkflowStarted", "StepCompleted", "WorkflowCompleted"}));
  EXPECT_EQ(completed.history.back().payload, (Json{{"done", 8}}));
  const auto replayed = view(id + "05");
  EXPECT_EQ(replayed.status, "completed");
  EXPECT_EQ(replayed.output, (Json{{"done", 10}}));
  EXPECT_EQ(view(id + "01").output, (Json{{"done", 2}}));
  const auto after = view(*fresh->execution_id);
  EXPECT_EQ(kinds(after),
            (std::vector<std::string>{"WorkflowStarted", "StepCompleted", "WorkflowCompleted"}));
  EXPECT_EQ(after.history.front().id, 0) << "shown from the row";
  EXPECT_EQ(after.history.front().payload,
            (Json{{"start_source", "client"}, {"start_source_ref", nullptr}}));
  EXPECT_EQ(after.history.back().payload, (Json{{"done", 14}}));
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = "
                              "'{}' AND kind = 'WorkflowCompleted'",
                              *fresh->execution_id)),
            0)
      << "the row is the completion: its output is stored once, and no event row";

  EXPECT_EQ(view(*old_key->execution_id).output, (Json{{"done", 18}}));

  // Retention takes every closed run and everything that hung off it, once
  // the claims' windows have lapsed.
  ASSERT_TRUE(conn_->exec_script(
      "UPDATE harvest_workflow_executions SET key_expires_at = now() - interval '1 s' "
      "WHERE idempotency_key IS NOT NULL; "
      "UPDATE harvest_start_claims SET expires_at = now() - interval '1 s'"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto purged = engine.purge();
  ASSERT_TRUE(purged) << purged.error().message;
  EXPECT_EQ(*purged, 8);
  for (const char* table :
       {"harvest_workflow_executions", "harvest_workflow_events", "harvest_signals",
        "harvest_engine_dead_letters", "harvest_start_claims"}) {
    EXPECT_EQ(count(fmt::format("SELECT count(*) FROM {}", table)), 0) << table;
  }
}

}  // namespace
}  // namespace harvest
