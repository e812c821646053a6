// Batch isolation (CON-18, CON-19): one bad message never touches another.
// An item that cannot be stored gets its own outcome on every batch path; a
// rebuild that commits nothing backs off; max_in_flight bounds messages in
// commit.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "connector_fixture.hpp"
#include <harvest/common/log.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;

// signals_with_start on "device_session": message {"device": i} signals
// entity "device-<i>" and starts it with {"note": ...}; "bad": "nul" or
// "utf8" makes the mapper put a string that cannot be stored into that start
// input (a NUL, or bytes that are not UTF-8), as a mapper copying a field of
// a binary record might.
SourceBinding entity_binding(size_t max_in_flight) {
  auto b = SourceBinding::signals_with_start("entities", "device-telemetry", "device_session",
                                             "reading");
  b.map_json([](const MessageCtx&, engine::Json r) -> MapResult {
    const std::string bad = r.value("bad", "");
    const std::string note = bad == "nul"    ? std::string("a\0b", 3)
                             : bad == "utf8" ? std::string("\xff\xfe")
                                             : std::string("fine");
    return MappedMessage{.workflow_id = "device-" + r.at("device").get<std::string>(),
                         .payload = engine::Json{{"seq", r.at("device")}},
                         .start_input = engine::Json{{"note", note}}};
  });
  b.start_input_from_mapper();
  b.max_in_flight(max_in_flight);
  return b;
}

// The reproduction of the bug: 32 messages for 32 entities, max_in_flight 16,
// message #7's start input holding one bad string. Before the fix, a NUL made
// PostgreSQL refuse #7's whole commit group (16 dead letters, none naming the
// NUL), and invalid UTF-8 threw while serialising the group, which was
// retried for ever (the partition never committed again).
TEST_F(ConnectorTest, a_bad_start_input_in_an_entity_batch_fails_only_its_own_message) {
  struct Case {
    const char* bad;
    const char* reason_names;
  };
  for (const Case& c : {Case{"nul", "NUL"}, Case{"utf8", "UTF-8"}}) {
    SCOPED_TRACE(c.bad);
    ASSERT_TRUE(
        db().exec_script("DELETE FROM harvest_signals; DELETE FROM harvest_workflow_events; "
                         "DELETE FROM harvest_workflow_executions"));
    sink_ = std::make_shared<RecordingDeadLetterSink>();
    auto source = std::make_shared<MockSource>("device-telemetry");
    auto rt = runtime(entity_binding(16), source);
    for (int i = 0; i < 32; ++i) {
      engine::Json msg = {{"device", std::to_string(i)}};
      if (i == 7) msg["bad"] = c.bad;
      source->push_kafka(0, i, msg.dump());
    }
    for (int pass = 0; pass < 4 && source->committed(0) != 32; ++pass) ASSERT_TRUE(rt->run_once());
    EXPECT_EQ(source->committed(0), 32) << "the partition committed to its end";
    EXPECT_EQ(executions(), 31) << "every entity but #7 has its run";
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals"), 31);
    EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = "
                     "'device-7'"),
              0);
    auto letters = sink_->letters();
    ASSERT_EQ(letters.size(), 1u) << "one dead letter, the bad message's own";
    EXPECT_EQ(letters[0].reason, "start_rejected");
    EXPECT_NE(letters[0].detail.find("start input"), std::string::npos) << letters[0].detail;
    EXPECT_NE(letters[0].detail.find(c.reason_names), std::string::npos) << letters[0].detail;
    EXPECT_EQ(letters[0].coordinates, "device-telemetry:0:7");
  }
}

// A message whose head never settles (a mapping rejection with no poison
// threshold) stalls its partition for good; the messages behind it are
// replayed by every rebuild. Those replays are acknowledged, but they move
// no committed position, so they are no evidence of progress: rebuilds back
// off (doubling from idle_backoff, at most 30 s) instead of storming the
// consumer group. Before the fix: ~10,500 rebuilds in 20 s.
TEST_F(ConnectorTest, rebuilds_that_commit_nothing_back_off_whatever_replays_were_acked) {
  log::LogCapture capture(spdlog::level::info);
  auto source = std::make_shared<MockSource>("orders.placed");
  auto b = order_binding();
  b.poison_threshold(0);  // never dead-lettered: the head stays unsettled
  ConnectorRuntimeConfig config;
  config.idle_backoff = 200ms;
  auto rt = runtime(b, source, config);
  source->push_kafka(0, 0, order_json("reject-head"));
  for (int i = 1; i < 10; ++i) source->push_kafka(0, i, order_json("A-" + std::to_string(i)));
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });
  std::this_thread::sleep_for(20s);
  stop.request_stop();
  consumer.join();
  // Rebuilds at 0, then after 0.2, 0.4, 0.8, 1.6, 3.2, 6.4 s of back-off
  // (12.6 s in all); the next would wait 12.8 s more.
  EXPECT_GE(source->recoveries(), 5);
  EXPECT_LE(source->recoveries(), 8);
  EXPECT_EQ(source->committed(0), std::nullopt) << "the head never settled";
  EXPECT_EQ(executions(), 9) << "each message behind the head started once";
  EXPECT_LT(capture.messages().size(), 100u) << "bounded logging";
  EXPECT_TRUE(capture.contains({"rebuilding the source in", "the last rebuild committed nothing"}));
}

// The evidence is per partition: commits on another partition say nothing
// about the stalled one. Partition 0's head never settles while partition 1
// receives and commits a new message every 50 ms; rebuilds for partition 0
// still back off (they used to count partition 1's commits as progress).
TEST_F(ConnectorTest, commits_on_another_partition_do_not_reset_a_stalled_partitions_back_off) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto b = order_binding();
  b.poison_threshold(0);
  ConnectorRuntimeConfig config;
  config.idle_backoff = 200ms;
  auto rt = runtime(b, source, config);
  source->push_kafka(0, 0, order_json("reject-head"));
  std::atomic<bool> feeding{true};
  std::jthread feeder([&] {
    for (int i = 0; feeding; ++i) {
      source->push_kafka(1, i, order_json("P1-" + std::to_string(i)));
      std::this_thread::sleep_for(50ms);
    }
  });
  std::stop_source stop;
  std::jthread consumer([&] { EXPECT_TRUE(rt->run(stop.get_token())); });
  std::this_thread::sleep_for(10s);
  stop.request_stop();
  consumer.join();
  feeding = false;
  feeder.join();
  // Rebuilds at 0, then after 0.2, 0.4, 0.8, 1.6, 3.2 s (6.2 s in all); the
  // next would wait 6.4 s more.
  EXPECT_GE(source->recoveries(), 4);
  EXPECT_LE(source->recoveries(), 7);
  EXPECT_EQ(source->committed(0), std::nullopt);
  EXPECT_GT(source->committed(1).value_or(0), 50) << "partition 1 kept committing, pass by pass";
}

// CON-19: max_in_flight bounds messages being committed, not only mapped.
// Seen from the store: a trigger counts, in a sequence (outside any
// transaction), every execution row inserted, and a deferred trigger counts
// it out as its transaction commits; each insert records how many rows are
// in open commits at that moment. The insert trigger sleeps, so concurrent
// commit groups overlap for sure.
TEST_F(ConnectorTest, max_in_flight_bounds_the_messages_inside_commit_transactions) {
  ASSERT_TRUE(db().exec_script(R"sql(
    CREATE SEQUENCE IF NOT EXISTS test_in_commit_in;
    CREATE SEQUENCE IF NOT EXISTS test_in_commit_out;
    CREATE TABLE IF NOT EXISTS test_in_commit_peak (n bigint);
    CREATE OR REPLACE FUNCTION test_count_in() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_sleep(0.002);
      INSERT INTO test_in_commit_peak VALUES (nextval('test_in_commit_in') -
        (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM test_in_commit_out));
      RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION test_count_out() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM nextval('test_in_commit_out'); RETURN NULL; END $$;
    DROP TRIGGER IF EXISTS test_count_in ON harvest_workflow_executions;
    DROP TRIGGER IF EXISTS test_count_out ON harvest_workflow_executions;
    CREATE TRIGGER test_count_in AFTER INSERT ON harvest_workflow_executions
      FOR EACH ROW EXECUTE FUNCTION test_count_in();
    CREATE CONSTRAINT TRIGGER test_count_out AFTER INSERT ON harvest_workflow_executions
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_count_out();
  )sql"));
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[this] {
    (void)db().exec_script(
        "DROP TRIGGER IF EXISTS test_count_in ON harvest_workflow_executions; "
        "DROP TRIGGER IF EXISTS test_count_out ON harvest_workflow_executions; "
        "DROP TABLE IF EXISTS test_in_commit_peak; DROP SEQUENCE IF EXISTS test_in_commit_in; "
        "DROP SEQUENCE IF EXISTS test_in_commit_out");
  }};
  for (size_t mif : {size_t{1}, size_t{8}, size_t{16}}) {
    SCOPED_TRACE(mif);
    ASSERT_TRUE(db().exec("TRUNCATE test_in_commit_peak"));
    auto source = std::make_shared<MockSource>("orders.placed");
    auto b = order_binding("orders-" + std::to_string(mif));
    b.max_in_flight(mif);
    ConnectorRuntimeConfig config;
    config.max_batch = 64;
    config.commit_concurrency = 2;
    auto rt = runtime(b, source, config);
    for (int i = 0; i < 64; ++i) {
      source->push_kafka(0, i, order_json("m" + std::to_string(mif) + "-" + std::to_string(i)));
    }
    auto s = rt->run_once();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->acked, 64u);
    EXPECT_EQ(scalar("SELECT count(*) FROM test_in_commit_peak"), 64);
    const long long peak = scalar("SELECT max(n) FROM test_in_commit_peak");
    EXPECT_LE(peak, static_cast<long long>(mif)) << "messages in commit at once";
    EXPECT_GE(peak, 1);
  }
}

}  // namespace
}  // namespace harvest::connector::testing

namespace harvest::connector::testing {
namespace {

// max_in_flight(1) on an entity binding: each entity's signals are staged in
// the order their messages sit in the log, across several passes.
TEST_F(ConnectorTest, max_in_flight_one_keeps_an_entitys_signals_in_log_order) {
  auto source = std::make_shared<MockSource>("device-telemetry");
  auto b =
      SourceBinding::signals_with_start("ordered", "device-telemetry", "device_session", "reading");
  b.map_json([](const MessageCtx&, engine::Json r) -> MapResult {
    return MappedMessage{"device-" + r.at("device").get<std::string>(), r};
  });
  b.max_in_flight(1);
  ConnectorRuntimeConfig config;
  config.max_batch = 7;  // several passes, batches cutting across entities
  auto rt = runtime(b, source, config);
  for (int i = 0; i < 60; ++i) {
    source->push_kafka(0, i, engine::Json{{"device", std::to_string(i % 3)}, {"seq", i}}.dump());
  }
  for (int pass = 0; pass < 20 && source->committed(0) != 60; ++pass) ASSERT_TRUE(rt->run_once());
  ASSERT_EQ(source->committed(0), 60);
  for (int d = 0; d < 3; ++d) {
    auto rows = db().exec(
        "SELECT (s.payload->>'seq')::int FROM harvest_signals s JOIN harvest_workflow_executions "
        "e ON e.id = s.execution_id WHERE e.workflow_id = $1 ORDER BY s.id",
        {"device-" + std::to_string(d)});
    ASSERT_TRUE(rows);
    ASSERT_EQ(rows->rows(), 20);
    for (int r = 0; r < rows->rows(); ++r) {
      EXPECT_EQ(std::stoi(rows->get(r, 0)), d + 3 * r) << "device " << d << ", signal " << r;
    }
  }
}

}  // namespace
}  // namespace harvest::connector::testing
