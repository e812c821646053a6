// ENG-8 (debounce, batch), ENG-14 (engine dead letters), ENG-15 (shards),
// execution listing and the run/queue metrics.
#include <gtest/gtest.h>

#include <atomic>

#include "support/pg_fixture.hpp"
#include <harvest/common/log.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

class SurfaceTest : public testing::PgTest {};

TEST_F(SurfaceTest, debounce_collapses_starts_within_the_window_and_the_last_input_wins) {
  WorkflowRegistry r;
  r.add(
      "reindex", [](WorkflowContext&, Json in) { return in; },
      WorkflowOptions{.debounce = DebouncePolicy{.window = 300ms}});
  auto engine = open_engine(std::move(r));
  for (int i = 1; i <= 5; ++i) {
    auto s = engine->start({.workflow = "reindex", .workflow_id = "doc-1", .input = {{"v", i}}});
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->kind, StartOutcomeKind::kDeferred);
  }
  ASSERT_TRUE(engine->start({.workflow = "reindex", .workflow_id = "doc-2", .input = {{"v", 9}}}));
  auto keyed =
      engine->start({.workflow = "reindex", .workflow_id = "doc-1", .idempotency_key = "k"});
  ASSERT_FALSE(keyed);
  EXPECT_EQ(keyed.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(keyed.error().message.find("debounce"), std::string::npos);
  auto no_id = engine->start({.workflow = "reindex"});
  ASSERT_FALSE(no_id);
  EXPECT_EQ(no_id.error().kind, ErrorKind::kBadRequest);

  ASSERT_TRUE(engine->fire_deferred());
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0)
      << "still inside the window";
  ASSERT_TRUE(eventually([&] {
    (void)engine->fire_deferred();
    return scalar("SELECT count(*) FROM harvest_workflow_executions") == 2;
  }));
  EXPECT_EQ(text("SELECT input::jsonb::text FROM harvest_workflow_executions WHERE workflow_id = "
                 "'doc-1#1'"),
            R"({"v": 5})");
  // A later burst for the same id fires a second run.
  ASSERT_TRUE(engine->start({.workflow = "reindex", .workflow_id = "doc-1", .input = {{"v", 6}}}));
  ASSERT_TRUE(eventually([&] {
    (void)engine->fire_deferred();
    return scalar("SELECT count(*) FROM harvest_workflow_executions") == 3;
  }));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                   "'doc-1#2'"),
            1);
}

TEST_F(SurfaceTest, batch_collects_admissions_into_one_run_by_size_or_by_time) {
  WorkflowRegistry r;
  r.add(
      "bulk_mail", [](WorkflowContext&, std::vector<std::string> to) { return to.size(); },
      WorkflowOptions{.batch = BatchPolicy{.max_size = 3, .max_wait = 400ms}});
  auto engine = open_engine(std::move(r));
  for (auto who : {"a", "b", "c", "d"}) {
    auto s = engine->start({.workflow = "bulk_mail", .input = who});
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->kind, StartOutcomeKind::kDeferred);
  }
  auto wrong = engine->start({.workflow = "bulk_mail", .input = 42});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().kind, ErrorKind::kInvalidInput);

  ASSERT_TRUE(engine->fire_deferred());
  EXPECT_EQ(text("SELECT input::jsonb::text FROM harvest_workflow_executions"),
            R"(["a", "b", "c"])")
      << "a full batch fires at once, in admission order";
  ASSERT_TRUE(eventually([&] {
    (void)engine->fire_deferred();
    return scalar("SELECT count(*) FROM harvest_workflow_executions") == 2;
  }));
  EXPECT_EQ(
      text("SELECT input::jsonb::text FROM harvest_workflow_executions ORDER BY created_at DESC "
           "LIMIT 1"),
      R"(["d"])")
      << "a partial batch fires once its oldest waited max_wait";
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_batch_items"), 0);
}

TEST_F(SurfaceTest,
       a_run_exhausting_its_retries_lands_in_the_dead_letters_and_replays_to_completion) {
  std::atomic<bool> healthy{false};
  std::atomic<int> charged{0};
  WorkflowRegistry r;
  r.add(
      "payout",
      [&](WorkflowContext& ctx, Json) {
        ctx.step("charge", [&] { return ++charged; });
        if (!healthy) throw std::runtime_error("bank API down");
        return std::string("paid");
      },
      WorkflowOptions{.max_attempts = 2, .retry_backoff = 10ms});
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "payout", .workflow_id = "p-1"});
  ASSERT_TRUE(s);
  Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(eventually([&] {
    auto dl = engine->list_dead_letters();
    return dl && dl->size() == 1;
  }));
  auto dl = engine->list_dead_letters();
  EXPECT_EQ((*dl)[0].execution_id, *s->execution_id);
  EXPECT_EQ((*dl)[0].error, "bank API down");
  EXPECT_EQ((*dl)[0].attempts, 2);
  EXPECT_EQ((*dl)[0].workflow_id, "p-1");

  healthy = true;
  ASSERT_TRUE(engine->replay_dead_letter(*s->execution_id));
  ASSERT_TRUE(
      eventually([&] { return engine->get_execution(*s->execution_id)->status == "completed"; }));
  EXPECT_EQ(engine->get_execution(*s->execution_id)->output, "paid");
  EXPECT_EQ(charged, 1) << "the recorded step is not executed again on replay";
  EXPECT_TRUE(engine->list_dead_letters()->empty());
  auto again = engine->replay_dead_letter(*s->execution_id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::kNotFound);
}

TEST_F(SurfaceTest, list_executions_filters_and_pages_newest_first) {
  WorkflowRegistry r;
  r.add("a", [](WorkflowContext&, Json) { return 1; });
  r.add("b", [](WorkflowContext&, Json) { return 1; });
  auto engine = open_engine(std::move(r));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(*engine->start({.workflow = "a"})->execution_id);
  ASSERT_TRUE(engine->start({.workflow = "b", .source = StartSource::kApi}));
  std::vector<std::string> seen;
  std::optional<std::string> cursor;
  int pages = 0;
  do {
    auto page = engine->list_executions({.workflow = "a", .limit = 2, .cursor = cursor});
    ASSERT_TRUE(page) << page.error().message;
    for (const auto& e : page->items) {
      EXPECT_EQ(e.workflow_name, "a");
      seen.push_back(e.id);
    }
    cursor = page->next_cursor;
    ++pages;
  } while (cursor && pages < 10);
  EXPECT_EQ(pages, 3);
  std::vector<std::string> expected(ids.rbegin(), ids.rend());
  EXPECT_EQ(seen, expected);
  auto api = engine->list_executions({.start_source = "api"});
  ASSERT_TRUE(api);
  ASSERT_EQ(api->items.size(), 1u);
  EXPECT_EQ(api->items[0].workflow_name, "b");
}

// A migration pending on any shard is reported, not only shard 0's.
TEST_F(SurfaceTest, a_migration_pending_on_a_later_shard_is_reported_at_open) {
  std::string second = extra_database();
  {
    auto c = store::Connection::open(second);
    ASSERT_TRUE(c);
    ASSERT_TRUE((*c)->exec(
        "DELETE FROM harvest_schema_migrations WHERE set_name = 'engine' AND version = "
        "(SELECT max(version) FROM harvest_schema_migrations WHERE set_name = 'engine')"));
  }
  log::LogCapture capture;
  EngineConfig config;
  config.shard_urls = {db_url(), second};
  config.profile = Profile::kProd;
  auto engine = Engine::open(config, {});
  ASSERT_TRUE(engine) << engine.error().message;
  const auto pending = (*engine)->pending_migrations_at_open();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].set_name, "engine");
  EXPECT_TRUE(capture.contains({"pending migration", "on shard 1"}));
}

TEST_F(SurfaceTest, two_shards_route_by_workflow_id_then_key_and_dedupe_on_their_shard) {
  std::string second = extra_database();
  WorkflowRegistry r;
  r.add("order", [](WorkflowContext&, Json in) { return in; });
  EngineConfig config;
  config.shard_urls = {db_url(), second};
  auto engine = open_engine(std::move(r), config);
  ASSERT_EQ(engine->shard_count(), 2u);
  EXPECT_EQ(engine->readable_shards(), 2);

  auto shard_rows = [&](const std::string& url, const std::string& sql) {
    auto c = store::Connection::open(url);
    EXPECT_TRUE(c);
    auto res = (*c)->exec(sql);
    EXPECT_TRUE(res) << res.error().message;
    return std::stoll(res->get(0, 0));
  };
  std::map<size_t, int> by_id_count;
  for (int i = 0; i < 40; ++i) {
    std::string wid = "order-" + std::to_string(i);
    size_t shard = engine->route("order", wid, std::nullopt);
    EXPECT_EQ(shard, engine->route("order", wid, "any-key")) << "workflow_id wins over the key";
    ++by_id_count[shard];
    auto s = engine->start({.workflow = "order", .workflow_id = wid});
    ASSERT_TRUE(s);
    auto again = engine->start({.workflow = "order", .workflow_id = wid});
    ASSERT_TRUE(again);
    EXPECT_EQ(again->kind, StartOutcomeKind::kIdempotentReplay) << "dedupe holds on its shard";
    EXPECT_EQ(again->execution_id, s->execution_id);
  }
  EXPECT_GT(by_id_count[0], 5);
  EXPECT_GT(by_id_count[1], 5);
  EXPECT_EQ(shard_rows(db_url(), "SELECT count(*) FROM harvest_workflow_executions"),
            by_id_count[0]);
  EXPECT_EQ(shard_rows(second, "SELECT count(*) FROM harvest_workflow_executions"), by_id_count[1]);

  // Keyed starts without a workflow_id route by the key; replays find their claim.
  for (int i = 0; i < 20; ++i) {
    std::string key = "key-" + std::to_string(i);
    auto s = engine->start({.workflow = "order", .idempotency_key = key});
    auto again = engine->start({.workflow = "order", .idempotency_key = key});
    ASSERT_TRUE(s && again);
    EXPECT_EQ(again->kind, StartOutcomeKind::kIdempotentReplay);
    EXPECT_EQ(again->execution_id, s->execution_id);
  }
  EXPECT_EQ(shard_rows(db_url(), "SELECT count(*) FROM harvest_start_idempotency") +
                shard_rows(second, "SELECT count(*) FROM harvest_start_idempotency"),
            20);
  EXPECT_GT(shard_rows(second, "SELECT count(*) FROM harvest_start_idempotency"), 0);

  // Signals follow their target's shard, by execution id and by workflow_id.
  std::string on_second;
  for (int i = 0; i < 40 && on_second.empty(); ++i) {
    if (engine->route("order", "order-" + std::to_string(i), std::nullopt) == 1) {
      on_second = "order-" + std::to_string(i);
    }
  }
  auto id = engine->find_execution("order", on_second);
  ASSERT_TRUE(id && *id);
  ASSERT_TRUE(engine->signal({.target = {.execution_id = **id}, .name = "ping"}));
  ASSERT_TRUE(
      engine->signal({.target = {.workflow = "order", .workflow_id = on_second}, .name = "ping"}));
  EXPECT_EQ(shard_rows(second, "SELECT count(*) FROM harvest_signals"), 2);
  EXPECT_EQ(engine->get_execution(**id)->workflow_id, on_second);

  // Workers run executions from both shards; listing spans both.
  Worker worker(*engine, {.concurrency = 2, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(eventually([&] {
    return shard_rows(db_url(),
                      "SELECT count(*) FROM harvest_workflow_executions WHERE status <> "
                      "'completed'") == 0 &&
           shard_rows(second,
                      "SELECT count(*) FROM harvest_workflow_executions WHERE status <> "
                      "'completed'") == 0;
  }));
  auto all = engine->list_executions({.limit = 500});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->items.size(), 60u);
}

TEST_F(SurfaceTest, shard_status_reports_an_unreachable_shard) {
  WorkflowRegistry r;
  r.add("order", [](WorkflowContext&, Json in) { return in; });
  auto engine = open_engine(std::move(r));
  auto status = engine->shard_status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_TRUE(status[0].readable);
  EXPECT_EQ(status[0].location.find("harvest@"), std::string::npos) << "no credentials shown";
}

TEST_F(SurfaceTest, run_duration_and_queue_depth_are_reported) {
  auto rec = std::make_shared<metrics::RecordingMetrics>();
  WorkflowRegistry r;
  r.add("quick", [](WorkflowContext&, Json) { return 1; });
  EngineConfig config;
  config.metrics = rec;
  auto engine = open_engine(std::move(r), config);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->start({.workflow = "quick"}));
  auto depth = engine->queue_depth();
  ASSERT_TRUE(depth);
  EXPECT_EQ(*depth, 3);
  EXPECT_EQ(rec->gauge(metrics::kEngineQueueDepth, {}), 3);
  Worker worker(*engine, {.concurrency = 1});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(worker.run_one());
  EXPECT_EQ(rec->observations(metrics::kEngineRunSeconds, {{"workflow", "quick"}}).size(), 3u);
  EXPECT_EQ(rec->counter(metrics::kEngineRunsCompleted, {{"workflow", "quick"}}), 3);
  EXPECT_EQ(*engine->queue_depth(), 0);
}

}  // namespace
}  // namespace harvest::engine
