// ENG-4, ENG-5, ENG-6, ENG-9, ENG-11, ENG-16: starting workflows.
#include <gtest/gtest.h>

#include <thread>

#include "support/pg_fixture.hpp"
#include <harvest/engine/connector_starts.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine {
namespace {

struct Order {
  std::string order_id;
  long total_cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Order, order_id, total_cents)

WorkflowRegistry order_workflows() {
  WorkflowRegistry r;
  r.add("fulfil_order", [](WorkflowContext&, Order o) { return "fulfilled " + o.order_id; });
  return r;
}

class StartTest : public testing::PgTest {};

StartRequest order_start(std::string id) {
  return StartRequest{.workflow = "fulfil_order",
                      .input = Json{{"order_id", std::move(id)}, {"total_cents", 100}}};
}

// ENG-11: the connector's internal path writes derived `conn:` keys, which
// every public path refuses; a key outside the prefix fails its own request.
TEST_F(StartTest, the_connector_path_takes_reserved_keys_and_refuses_any_other_alone) {
  auto engine = open_engine(order_workflows());
  std::vector<internal::DerivedStart> starts;
  starts.push_back({order_start("C-1"), std::string("conn:orders:0:41")});
  starts.push_back({order_start("C-2"), std::string("orders:0:42")});
  starts.push_back({order_start("C-3"), std::nullopt});
  auto out = internal::ConnectorStarts::start_batch(*engine, std::move(starts));
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(out[0]) << out[0].error().message;
  EXPECT_EQ(out[0]->outcome.kind, StartOutcomeKind::kStarted);
  ASSERT_FALSE(out[1]);
  EXPECT_EQ(out[1].error().kind, ErrorKind::kInternal);
  ASSERT_TRUE(out[2]) << out[2].error().message;
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency WHERE idempotency_key = "
                   "'conn:orders:0:41'"),
            1);
  // The public path refuses the same key.
  auto req = order_start("C-4");
  req.idempotency_key = "conn:orders:0:41";
  auto refused = engine->start(req);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::kBadRequest);
}

// Coordinate collisions: a derived key stores its record's fingerprint; a
// later start under the key with another fingerprint is a collision (never
// a plain replay), the same one a replay; with refuse_collisions a batch
// holding a collision commits nothing and says which requests were
// withheld.
TEST_F(StartTest, a_key_hit_from_another_record_is_a_collision_and_can_refuse_the_batch) {
  auto engine = open_engine(order_workflows());
  auto derived = [](std::string id, std::string key, std::optional<int64_t> fp) {
    return internal::DerivedStart{order_start(std::move(id)), std::move(key), fp};
  };
  std::vector<internal::DerivedStart> first;
  first.push_back(derived("F-1", "conn:1:k1", 11));
  first.push_back(derived("F-2", "conn:1:k2", std::nullopt));
  auto created = internal::ConnectorStarts::start_batch(*engine, std::move(first));
  ASSERT_TRUE(created[0] && created[1]);
  EXPECT_EQ(scalar("SELECT key_fingerprint FROM harvest_workflow_executions WHERE "
                   "idempotency_key = 'conn:1:k1'"),
            11);

  std::vector<internal::DerivedStart> again;
  again.push_back(derived("F-1", "conn:1:k1", 11));  // a redelivery
  again.push_back(derived("X-1", "conn:1:k1", 12));  // another record, same key
  again.push_back(derived("Y-1", "conn:1:k2", 99));  // the holder has no fingerprint
  again.push_back(derived("Z-1", "conn:1:k3", 5));   // fresh
  auto out = internal::ConnectorStarts::start_batch(*engine, std::move(again));
  ASSERT_EQ(out.size(), 4u);
  for (const auto& o : out) ASSERT_TRUE(o) << o.error().message;
  EXPECT_FALSE(out[0]->collision);
  EXPECT_EQ(out[0]->outcome.kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_TRUE(out[1]->collision);
  EXPECT_EQ(out[1]->outcome.execution_id, created[0]->outcome.execution_id) << "names the holder";
  EXPECT_FALSE(out[2]->collision) << "a run without a fingerprint never collides";
  EXPECT_EQ(out[3]->outcome.kind, StartOutcomeKind::kStarted);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 3);

  std::vector<internal::DerivedStart> refused;
  refused.push_back(derived("W-1", "conn:1:k4", 1));
  refused.push_back(derived("V-1", "conn:1:k1", 13));
  auto held = internal::ConnectorStarts::start_batch(*engine, std::move(refused), true);
  ASSERT_TRUE(held[0] && held[1]);
  EXPECT_TRUE(held[0]->withheld);
  EXPECT_TRUE(held[1]->collision);
  EXPECT_EQ(held[1]->outcome.execution_id, created[0]->outcome.execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 3)
      << "a refused batch commits nothing";
}

TEST_F(StartTest, start_commits_execution_row_and_started_event) {
  auto engine = open_engine(order_workflows());
  auto req = order_start("A-1");
  req.source = StartSource::kApi;
  auto r = engine->start(req);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, StartOutcomeKind::kStarted);
  ASSERT_TRUE(r->execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE id = $1 AND status = "
                   "'pending' AND start_source = 'api'",
                   {r->execution_id}),
            1);
  // One row per start (schema v2): no event row; history shows the start
  // from the execution row.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events WHERE execution_id = $1",
                   {r->execution_id}),
            0);
  auto view = engine->get_execution(*r->execution_id);
  ASSERT_TRUE(view) << view.error().message;
  ASSERT_EQ(view->history.size(), 1u);
  EXPECT_EQ(view->history[0].kind, "WorkflowStarted");
  EXPECT_EQ(view->history[0].name, "fulfil_order");
  EXPECT_EQ(view->history[0].payload["start_source"], "api");
}

TEST_F(StartTest, keyed_start_replays_inside_window_and_starts_anew_after_expiry_and_purge) {
  auto engine = open_engine(order_workflows());
  auto req = order_start("A-1");
  req.idempotency_key = "checkout-77";
  auto first = engine->start(req);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(first->kind, StartOutcomeKind::kStarted);
  auto again = engine->start(req);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(again->execution_id, first->execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
  EXPECT_EQ(text("SELECT ((expires_at - created_at) = interval '24 hours')::text FROM "
                 "harvest_start_idempotency WHERE idempotency_key = 'checkout-77'"),
            "true");

  // The window lapses: the claim is no longer live, and the key starts a new
  // run, which takes the key over from the old one.
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET key_expires_at = now() - interval '1 s' "
                "WHERE idempotency_key IS NOT NULL"));
  auto purged = engine->purge();
  ASSERT_TRUE(purged);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 0);
  auto later = engine->start(req);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->kind, StartOutcomeKind::kStarted);
  EXPECT_NE(later->execution_id, first->execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 2);
  EXPECT_EQ(text("SELECT id::text FROM harvest_workflow_executions WHERE "
                 "idempotency_key = 'checkout-77'"),
            *later->execution_id);
  EXPECT_EQ(text("SELECT execution_id::text FROM harvest_start_idempotency"), *later->execution_id);
}

// Schema v2: the claim lives on the run it created, so retention keeps a
// closed run while its key's window is open — a redelivery inside the window
// still resolves to it — and purges it once the window lapses.
TEST_F(StartTest, retention_keeps_a_closed_run_while_its_key_is_claimed) {
  EngineConfig config;
  config.retention.with_max_age(std::chrono::seconds(0));
  auto engine = open_engine(order_workflows(), config);
  auto req = order_start("A-1");
  req.idempotency_key = "k-kept";
  auto first = engine->start(req);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET status = 'completed', "
                "completed_at = now() - interval '1 hour'"));
  auto purged = engine->purge();
  ASSERT_TRUE(purged) << purged.error().message;
  EXPECT_EQ(*purged, 0) << "the run holds a live claim";
  auto again = engine->start(req);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(again->execution_id, first->execution_id);

  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET key_expires_at = now() - interval '1 s'"));
  purged = engine->purge();
  ASSERT_TRUE(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
  auto later = engine->start(req);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->kind, StartOutcomeKind::kStarted);
  EXPECT_NE(later->execution_id, first->execution_id);
}

TEST_F(StartTest, expired_claim_not_yet_purged_is_taken_over) {
  EngineConfig config;
  config.start_idempotency_window = std::chrono::seconds(60);
  auto engine = open_engine(order_workflows(), config);
  auto req = order_start("A-1");
  req.idempotency_key = "k";
  auto first = engine->start(req);
  ASSERT_TRUE(first);
  EXPECT_EQ(text("SELECT ((expires_at - created_at) = interval '60 seconds')::text FROM "
                 "harvest_start_idempotency"),
            "true");
  ASSERT_TRUE(
      db().exec("UPDATE harvest_workflow_executions SET key_expires_at = now() - interval '1 s' "
                "WHERE idempotency_key IS NOT NULL"));
  auto second = engine->start(req);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->kind, StartOutcomeKind::kStarted);
  EXPECT_NE(second->execution_id, first->execution_id);
}

TEST_F(StartTest, workflow_id_dedupe_returns_the_existing_execution) {
  auto engine = open_engine(order_workflows());
  auto req = order_start("A-1");
  req.workflow_id = "order-A-1";
  auto first = engine->start(req);
  ASSERT_TRUE(first);
  req.input["total_cents"] = 999;  // a different input does not create a second run
  auto second = engine->start(req);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(second->execution_id, first->execution_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
  auto found = engine->find_execution("fulfil_order", "order-A-1");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, first->execution_id);
}

TEST_F(StartTest, concurrent_keyed_starts_create_one_execution) {
  auto engine = open_engine(order_workflows());
  std::vector<std::jthread> threads;
  std::vector<Result<StartOutcome>> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto req = order_start("A-1");
      req.idempotency_key = "same-key";
      results[i] = engine->start(req);
    });
  }
  threads.clear();
  int started = 0;
  for (auto& r : results) {
    ASSERT_TRUE(r) << r.error().message;
    started += r->kind == StartOutcomeKind::kStarted;
    EXPECT_EQ(r->execution_id, results[0]->execution_id);
  }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
}

TEST_F(StartTest, rejections_carry_permanent_kinds_naming_the_problem) {
  auto engine = open_engine(order_workflows());
  auto unknown = engine->start(StartRequest{.workflow = "nope"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(unknown.error().message.find("nope"), std::string::npos);

  auto bad = engine->start(StartRequest{.workflow = "fulfil_order", .input = Json{{"x", 1}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(bad.error().message.find("order_id"), std::string::npos);
  EXPECT_TRUE(is_permanent(bad.error()));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
}

TEST_F(StartTest, reserved_conn_prefix_is_rejected_on_every_caller_path_and_CONN_accepted) {
  WorkflowRegistry r = order_workflows();
  r.add("entity", [](WorkflowContext&, Json) { return 1; });
  auto engine = open_engine(std::move(r));

  auto req = order_start("A-1");
  req.idempotency_key = "conn:orders:0:41";
  auto start = engine->start(req);
  ASSERT_FALSE(start);
  EXPECT_EQ(start.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(start.error().message.find("reserved prefix"), std::string::npos);

  ASSERT_TRUE(db().exec("BEGIN"));
  auto tx_start = engine->start_in_transaction(db().raw(), req);
  ASSERT_FALSE(tx_start);
  EXPECT_EQ(tx_start.error().kind, ErrorKind::kBadRequest);
  ASSERT_TRUE(db().exec("ROLLBACK"));

  auto sws = engine->signal_with_start(SignalWithStartRequest{
      .workflow = "entity", .workflow_id = "e1", .signal = "s", .idempotency_key = "conn:x"});
  ASSERT_FALSE(sws);
  EXPECT_EQ(sws.error().kind, ErrorKind::kBadRequest);

  auto ok = engine->signal_with_start(SignalWithStartRequest{
      .workflow = "entity", .workflow_id = "e1", .signal = "s", .idempotency_key = "CONN:x"});
  ASSERT_TRUE(ok) << ok.error().message;

  auto sig = engine->signal(SignalRequest{
      .target = {.execution_id = ok->execution_id}, .name = "s", .idempotency_key = "conn:y"});
  ASSERT_FALSE(sig);
  EXPECT_EQ(sig.error().kind, ErrorKind::kBadRequest);

  req.idempotency_key = "CONN:orders:0:41";
  auto upper = engine->start(req);
  ASSERT_TRUE(upper) << upper.error().message;
  EXPECT_EQ(upper->kind, StartOutcomeKind::kStarted);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE idempotency_key LIKE 'conn:%'"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency WHERE idempotency_key LIKE "
                   "'conn:%'"),
            0);
}

// Group commit of starts: one start_batch call holding fresh, replayed,
// in-batch duplicate, workflow_id-conflicting, reserved-prefix, deferred and
// rejected items gives each item the outcome a single start gives it.
TEST_F(StartTest, a_mixed_batch_gives_each_item_its_single_start_outcome) {
  WorkflowRegistry r = order_workflows();
  r.add(
      "reindex", [](WorkflowContext&, Json in) { return in; },
      WorkflowOptions{.debounce = DebouncePolicy{.window = std::chrono::milliseconds(60000)}});
  auto engine = open_engine(std::move(r));
  auto keyed = [](std::string order, std::string key) {
    auto req = order_start(std::move(order));
    req.idempotency_key = std::move(key);
    return req;
  };
  auto earlier = engine->start(keyed("A-0", "k-replay"));
  ASSERT_TRUE(earlier) << earlier.error().message;
  auto named = order_start("A-named");
  named.workflow_id = "order-named";
  auto existing = engine->start(named);
  ASSERT_TRUE(existing) << existing.error().message;

  auto keyed_on_existing_id = keyed("A-x", "k-on-named");
  keyed_on_existing_id.workflow_id = "order-named";
  auto fresh_named = order_start("A-new");
  fresh_named.workflow_id = "order-new";
  const std::vector<StartRequest> batch{
      keyed("A-1", "k-fresh"),                          // 0 fresh keyed
      keyed("A-0", "k-replay"),                         // 1 replay
      keyed("A-1", "k-fresh"),                          // 2 in-batch repeat
      named,                                            // 3 workflow_id dedupe
      keyed_on_existing_id,                             // 4 key, existing id
      keyed("A-2", "conn:orders:0:1"),                  // 5 reserved prefix
      {.workflow = "reindex", .workflow_id = "doc-1"},  // 6 deferred
      {.workflow = "no_such_workflow"},                 // 7 rejected
      fresh_named,                                      // 8 fresh named
      order_start("A-plain"),                           // 9 fresh, no key/id
  };
  auto out = engine->start_batch(batch);
  ASSERT_EQ(out.size(), batch.size());
  for (size_t i : {0u, 1u, 2u, 3u, 4u, 6u, 8u, 9u}) {
    ASSERT_TRUE(out[i]) << "item " << i << ": " << out[i].error().message;
  }
  EXPECT_EQ(out[0]->kind, StartOutcomeKind::kStarted);
  EXPECT_EQ(out[1]->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(out[1]->execution_id, earlier->execution_id);
  EXPECT_EQ(out[2]->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(out[2]->execution_id, out[0]->execution_id);
  EXPECT_EQ(out[3]->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(out[3]->execution_id, existing->execution_id);
  EXPECT_EQ(out[4]->kind, StartOutcomeKind::kIdempotentReplay);
  EXPECT_EQ(out[4]->execution_id, existing->execution_id);
  ASSERT_FALSE(out[5]);
  EXPECT_EQ(out[5].error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(out[5].error().message.find("reserved prefix"), std::string::npos);
  EXPECT_EQ(out[6]->kind, StartOutcomeKind::kDeferred);
  EXPECT_FALSE(out[6]->execution_id);
  ASSERT_FALSE(out[7]);
  EXPECT_EQ(out[7].error().kind, engine->start(batch[7]).error().kind);
  EXPECT_EQ(out[8]->kind, StartOutcomeKind::kStarted);
  EXPECT_EQ(out[9]->kind, StartOutcomeKind::kStarted);
  EXPECT_NE(out[8]->execution_id, out[9]->execution_id);

  // Exactly the runs a single start of each would have created: two before,
  // three fresh now (0, 8, 9). A run holds the key of the start that created
  // it, so the key that resolved to the named run is held by no row (schema
  // v2); its workflow_id resolves it again below.
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 5);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_events"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency WHERE "
                   "idempotency_key = 'k-on-named'"),
            0);
  EXPECT_EQ(text("SELECT execution_id::text FROM harvest_start_idempotency WHERE "
                 "idempotency_key = 'k-fresh'"),
            *out[0]->execution_id)
      << "the claim is on the row it created";
  // And each item, started alone afterwards, agrees with its batch outcome.
  for (size_t i : {0u, 1u, 2u, 3u, 4u, 8u}) {
    auto alone = engine->start(batch[i]);
    ASSERT_TRUE(alone) << alone.error().message;
    EXPECT_EQ(alone->kind, StartOutcomeKind::kIdempotentReplay) << "item " << i;
    EXPECT_EQ(alone->execution_id, out[i]->execution_id) << "item " << i;
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 5);
}

TEST_F(StartTest, transactional_start_commits_and_rolls_back_with_the_callers_transaction) {
  auto engine = open_engine(order_workflows());
  ASSERT_TRUE(db().exec("CREATE TABLE orders (id text PRIMARY KEY)"));

  ASSERT_TRUE(db().exec("BEGIN"));
  ASSERT_TRUE(db().exec("INSERT INTO orders VALUES ('A-1')"));
  auto rolled = engine->start_in_transaction(db().raw(), order_start("A-1"));
  ASSERT_TRUE(rolled) << rolled.error().message;
  ASSERT_TRUE(db().exec("ROLLBACK"));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM orders"), 0);

  ASSERT_TRUE(db().exec("BEGIN"));
  ASSERT_TRUE(db().exec("INSERT INTO orders VALUES ('A-2')"));
  auto kept = engine->start_in_transaction(db().raw(), order_start("A-2"));
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->kind, StartOutcomeKind::kStarted);
  ASSERT_TRUE(db().exec("COMMIT"));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE id = $1",
                   {kept->execution_id}),
            1);
  EXPECT_EQ(scalar("SELECT count(*) FROM orders"), 1);

  auto outside = engine->start_in_transaction(db().raw(), order_start("A-3"));
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().kind, ErrorKind::kBadRequest);
}

TEST_F(StartTest, provenance_is_recorded) {
  auto engine = open_engine(order_workflows());
  auto req = order_start("A-1");
  req.source = StartSource::kBroker;
  req.source_ref = "orders.placed:0:41";
  auto r = engine->start(req);
  ASSERT_TRUE(r);
  auto view = engine->get_execution(*r->execution_id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->start_source, "broker");
  EXPECT_EQ(view->start_source_ref, "orders.placed:0:41");
}

TEST_F(StartTest, pool_exhaustion_is_a_transient_error_not_a_hang) {
  EngineConfig config;
  config.pool_size = 1;
  config.pool_acquire_timeout = std::chrono::milliseconds(200);
  auto engine = open_engine(order_workflows(), config);
  auto held = engine->pool().acquire();
  ASSERT_TRUE(held);
  auto t0 = std::chrono::steady_clock::now();
  auto r = engine->start(order_start("A-1"));
  auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kTransient);
  EXPECT_NE(r.error().message.find("pool exhausted"), std::string::npos);
  EXPECT_LT(waited, std::chrono::seconds(2));
}

TEST_F(StartTest, unreachable_database_is_transient) {
  auto conn = store::Connection::open("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2");
  ASSERT_FALSE(conn);
  EXPECT_EQ(conn.error().kind, ErrorKind::kTransient);
}

TEST_F(StartTest, starts_are_counted_by_outcome_without_ids_in_labels) {
  auto rec = std::make_shared<metrics::RecordingMetrics>();
  EngineConfig config;
  config.metrics = rec;
  auto engine = open_engine(order_workflows(), config);
  auto req = order_start("A-1");
  req.workflow_id = "order-A-1";
  ASSERT_TRUE(engine->start(req));
  ASSERT_TRUE(engine->start(req));
  ASSERT_FALSE(engine->start(StartRequest{.workflow = "fulfil_order", .input = 3}));
  using L = metrics::Labels;
  EXPECT_EQ(
      rec->counter(metrics::kEngineStarts, L{{"workflow", "fulfil_order"}, {"outcome", "started"}}),
      1);
  EXPECT_EQ(rec->counter(metrics::kEngineStarts,
                         L{{"workflow", "fulfil_order"}, {"outcome", "idempotent_replay"}}),
            1);
  EXPECT_EQ(rec->counter(metrics::kEngineStarts,
                         L{{"workflow", "fulfil_order"}, {"outcome", "rejected"}}),
            1);
  for (const auto& [name, labels] : rec->series()) {
    for (const auto& [k, v] : labels) EXPECT_EQ(v.find("order-A-1"), std::string::npos);
  }
}

}  // namespace
}  // namespace harvest::engine

namespace harvest::engine {
namespace {

// Batch isolation (CON-18) on the signal-with-start batch path.
class EntityBatchTest : public testing::PgTest {
 protected:
  std::unique_ptr<Engine> open() {
    WorkflowRegistry r;
    r.add("session", [](WorkflowContext&, Json) { return 0; });
    return open_engine(std::move(r));
  }
  static SignalWithStartRequest item(int i, Json start = Json::object()) {
    return SignalWithStartRequest{.workflow = "session",
                                  .workflow_id = "entity-" + std::to_string(i),
                                  .start_input = std::move(start),
                                  .signal = "reading",
                                  .payload = Json{{"i", i}},
                                  .idempotency_key = "k-" + std::to_string(i)};
  }
};

// A start input that cannot be stored (NUL, invalid UTF-8, too deep) fails
// its own item with a reason naming the start input; it is never serialised
// into the batch, so its neighbours are untouched; it still signals a run
// that exists.
TEST_F(EntityBatchTest, a_start_input_that_cannot_be_stored_fails_only_its_own_item) {
  auto engine = open();
  Json deep = 1;
  for (int d = 0; d < 200; ++d) deep = Json::array({deep});
  ASSERT_TRUE(engine->signal_with_start(item(3)));  // entity-3 exists
  std::vector<SignalWithStartRequest> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(item(i));
  batch[1].start_input = Json{{"note", std::string("a\0b", 3)}};
  batch[2].start_input = Json{{"note", std::string("\xff\xfe")}};
  batch[5].start_input = deep;
  batch[3].start_input = Json{{"note", std::string("\xff")}};  // exists: the signal lands
  batch[3].idempotency_key = "k-3b";
  auto out = engine->signal_with_start_batch(batch);
  ASSERT_EQ(out.size(), 8u);
  for (int i : {0, 3, 4, 6, 7}) {
    ASSERT_TRUE(out[i]) << i << ": " << out[i].error().message;
    EXPECT_EQ(out[i]->started, i != 3) << i;
  }
  for (int i : {1, 2, 5}) {
    ASSERT_FALSE(out[i]) << i;
    EXPECT_EQ(out[i].error().kind, ErrorKind::kInvalidInput) << i;
    EXPECT_NE(out[i].error().message.find("start input"), std::string::npos)
        << out[i].error().message;
  }
  EXPECT_NE(out[1].error().message.find("NUL"), std::string::npos) << out[1].error().message;
  EXPECT_NE(out[2].error().message.find("UTF-8"), std::string::npos) << out[2].error().message;
  EXPECT_NE(out[5].error().message.find("limit of 128"), std::string::npos)
      << out[5].error().message;
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 5);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 6);
}

// A batch the database refuses as a whole although every item passed
// validation (here a trigger refuses one workflow_id) is retried item by
// item: only the item at fault fails, with the database's refusal.
TEST_F(EntityBatchTest, a_batch_refused_as_a_whole_is_retried_item_by_item) {
  auto engine = open();
  ASSERT_TRUE(db().exec_script(R"sql(
    CREATE OR REPLACE FUNCTION test_refuse_entity() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.workflow_id = 'entity-4' THEN
        RAISE EXCEPTION 'refused by policy' USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_refuse_entity BEFORE INSERT ON harvest_workflow_executions
      FOR EACH ROW EXECUTE FUNCTION test_refuse_entity();
  )sql"));
  std::vector<SignalWithStartRequest> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(item(i));
  auto out = engine->signal_with_start_batch(batch);
  ASSERT_TRUE(db().exec("DROP TRIGGER test_refuse_entity ON harvest_workflow_executions"));
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    if (i == 4) {
      ASSERT_FALSE(out[i]);
      EXPECT_TRUE(is_permanent(out[i].error())) << out[i].error().describe();
      continue;
    }
    ASSERT_TRUE(out[i]) << i << ": " << out[i].error().message;
    EXPECT_TRUE(out[i]->started) << i;
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 7);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 7);
}

}  // namespace
}  // namespace harvest::engine
