// store::Connection::exec_pipeline: one round trip for several statements,
// one implicit transaction, and statements prepared once per session.
#include <gtest/gtest.h>

#include "support/pg_fixture.hpp"
#include <harvest/store/pg.hpp>

namespace harvest::store {
namespace {

class PipelineTest : public harvest::testing::PgTest {
 protected:
  std::unique_ptr<Connection> open() {
    auto c = Connection::open(db_url());
    EXPECT_TRUE(c) << c.error().message;
    return std::move(*c);
  }
  static long long prepared_count(Connection& c) {
    auto r = c.exec("SELECT count(*) AS v FROM pg_prepared_statements");
    return r ? r->get_int(0, "v") : -1;
  }
};

TEST_F(PipelineTest, statements_run_as_one_transaction_in_order) {
  auto c = open();
  ASSERT_TRUE(c->exec("CREATE TABLE pipe_t (v int PRIMARY KEY)"));
  auto ok = c->exec_pipeline(
      {{"INSERT INTO pipe_t VALUES ($1)", {"1"}}, {"SELECT count(*) AS v FROM pipe_t", {}}});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ((*ok)[1].get_int(0, "v"), 1) << "the second statement sees the first";
  // The second statement fails: the first is rolled back with it.
  auto bad = c->exec_pipeline(
      {{"INSERT INTO pipe_t VALUES ($1)", {"2"}}, {"INSERT INTO pipe_t VALUES ($1)", {"1"}}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kConflict);
  EXPECT_EQ(scalar("SELECT count(*) FROM pipe_t"), 1);
}

TEST_F(PipelineTest, a_prepared_statement_is_prepared_once_per_session) {
  auto c = open();
  const Statement twice{"SELECT $1::int * 2 AS v", {"21"}, Plan::kPrepared};
  for (int i = 0; i < 3; ++i) {
    auto r = c->exec_pipeline({twice, {"SELECT $1::int + 1 AS v", {"1"}, Plan::kPrepared}});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ((*r)[0].get_int(0, "v"), 42);
    EXPECT_EQ((*r)[1].get_int(0, "v"), 2);
  }
  EXPECT_EQ(prepared_count(*c), 2) << "each statement prepared exactly once";
  // Alone, a prepared statement takes the same path.
  auto one = c->exec_pipeline({twice});
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->front().get_int(0, "v"), 42);
}

TEST_F(PipelineTest, a_prepare_aborted_by_an_earlier_failure_is_prepared_again_later) {
  auto c = open();
  const Statement late{"SELECT $1::int - 1 AS v", {"5"}, Plan::kPrepared};
  auto bad = c->exec_pipeline({{"SELECT 1 / $1::int", {"0"}}, late});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kBadRequest) << "22012 division by zero";
  auto good = c->exec_pipeline({late});
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->front().get_int(0, "v"), 4);
}

TEST_F(PipelineTest, a_keyed_statement_runs_on_a_generic_plan_and_the_session_is_restored) {
  auto c = open();
  const std::string probe =
      "SELECT current_setting('plan_cache_mode') AS mode, "
      "current_setting('enable_seqscan') AS seq, $1::int AS v";
  auto r = c->exec_pipeline({{probe, {"1"}, Plan::kKeyed}, {probe, {"2"}, Plan::kPrepared}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2U) << "the injected settings yield no results";
  EXPECT_EQ((*r)[0].get(0, "mode"), "force_generic_plan");
  EXPECT_EQ((*r)[0].get(0, "seq"), "off");
  EXPECT_EQ((*r)[1].get(0, "mode"), "force_custom_plan") << "the next statement plans as usual";
  EXPECT_EQ((*r)[1].get(0, "seq"), "on");
  auto keyed = c->exec_keyed(probe, {"3"});
  ASSERT_TRUE(keyed) << keyed.error().message;
  EXPECT_EQ(keyed->get(0, "mode"), "force_generic_plan");
  EXPECT_EQ(keyed->get_int(0, "v"), 3);
  // A keyed statement that fails aborts the transaction: the settings it ran
  // under are undone with it.
  auto bad = c->exec_pipeline({{"SELECT 1 / $1::int AS v", {"0"}, Plan::kKeyed}});
  ASSERT_FALSE(bad);
  auto after = c->exec(
      "SELECT current_setting('plan_cache_mode') AS mode, "
      "current_setting('enable_seqscan') AS seq");
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->get(0, "mode"), "force_custom_plan");
  EXPECT_EQ(after->get(0, "seq"), "on");
}

TEST_F(PipelineTest, a_borrowed_session_gets_unprepared_statements) {
  auto owner = open();
  for (int i = 0; i < 2; ++i) {
    auto borrowed = Connection::borrow(owner->raw());
    auto r = borrowed->exec_pipeline({{"SELECT $1::int AS v", {"7"}, Plan::kPrepared}});
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->front().get_int(0, "v"), 7);
  }
  EXPECT_EQ(prepared_count(*owner), 0) << "nothing left behind in the caller's session";
}

}  // namespace
}  // namespace harvest::store

namespace harvest::store {
namespace {

std::string option_of(const Connection& c, const std::string& keyword) {
  PQconninfoOption* options = PQconninfo(c.raw());
  std::string value = "(none)";
  for (PQconninfoOption* o = options; o && o->keyword; ++o) {
    if (keyword == o->keyword) value = o->val ? o->val : "(unset)";
  }
  PQconninfoFree(options);
  return value;
}

using ConnectionSettingsTest = harvest::testing::PgTest;

// A silent network: a peer that goes silent must not hold a session
// forever. Every session gets a connect timeout, keepalives and a TCP user
// timeout, unless the URL says otherwise.
TEST_F(ConnectionSettingsTest, sessions_get_timeouts_and_keepalives_unless_the_url_sets_its_own) {
  auto plain = Connection::open(db_url());
  ASSERT_TRUE(plain) << plain.error().describe();
  EXPECT_EQ(option_of(**plain, "connect_timeout"), "5");
  EXPECT_EQ(option_of(**plain, "keepalives"), "1");
  EXPECT_EQ(option_of(**plain, "keepalives_idle"), "10");
  EXPECT_EQ(option_of(**plain, "keepalives_interval"), "5");
  EXPECT_EQ(option_of(**plain, "keepalives_count"), "3");
  EXPECT_EQ(option_of(**plain, "tcp_user_timeout"), "15000");

  const std::string url = db_url();
  const char sep = url.find('?') == std::string::npos ? '?' : '&';
  auto own = Connection::open(url + sep + "connect_timeout=7&tcp_user_timeout=1000");
  ASSERT_TRUE(own) << own.error().describe();
  EXPECT_EQ(option_of(**own, "connect_timeout"), "7") << "the URL's value wins";
  EXPECT_EQ(option_of(**own, "tcp_user_timeout"), "1000");
  EXPECT_EQ(option_of(**own, "keepalives_idle"), "10") << "what the URL leaves out keeps ours";
  auto r = (*own)->exec("SELECT 1 AS v");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_int(0, "v"), 1);
}

// Commits in doubt: a COMMIT whose connection broke before its answer is a
// commit in doubt — counted and logged, as the network fault scenario
// reports; a statement the database refused on a healthy connection is not.
TEST_F(PipelineTest, a_commit_whose_connection_broke_is_counted_in_doubt_and_a_refusal_is_not) {
  auto c = open();
  ASSERT_TRUE(c->exec("CREATE TABLE doubt_t (v int PRIMARY KEY)"));
  const uint64_t before = commits_in_doubt();
  auto refused = c->exec_pipeline(
      {{"INSERT INTO doubt_t VALUES ($1)", {"1"}}, {"INSERT INTO doubt_t VALUES ($1)", {"1"}}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(commits_in_doubt(), before) << "a refusal is an answer";
  auto tx = Transaction::begin(*c);
  ASSERT_TRUE(tx);
  ASSERT_TRUE(c->exec("INSERT INTO doubt_t VALUES (2)"));
  const long long pid = c->exec("SELECT pg_backend_pid() AS v")->get_int(0, "v");
  // Ended from outside, and waited for (up to 5 s), while it is idle in the
  // transaction: the COMMIT then goes to a closed connection.
  ASSERT_EQ(text("SELECT pg_terminate_backend(" + std::to_string(pid) + ", 5000)::text"), "true");
  auto committed = tx->commit();
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().kind, ErrorKind::kTransient);
  EXPECT_EQ(commits_in_doubt(), before + 1);
}

}  // namespace
}  // namespace harvest::store
