// Every SQL statement the product embeds (src/harvest/*/sql/, one statement
// per file) is prepared against a freshly migrated database: a statement that
// names a column, table or function the schema does not have, or that no
// longer parses, fails here rather than on the path that runs it.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <string>

#include "support/pg_fixture.hpp"
#include <harvest/engine/sql/all.hpp>
#include <harvest/store/sql/all.hpp>
#if HARVEST_WITH_CONNECTORS
#include <harvest/connector/sql/all.hpp>
#include <harvest/connector_dlq/sql/all.hpp>
#endif

namespace harvest {
namespace {

class StatementsTest : public testing::PgTest {
 protected:
  // Prepares `text` under a throwaway name; the server's message on failure.
  std::string prepare(std::string_view text) {
    const std::string sql(text);
    PGresult* r = PQprepare(db().raw(), "harvest_statement_check", sql.c_str(), 0, nullptr);
    std::string error;
    if (PQresultStatus(r) != PGRES_COMMAND_OK) error = PQresultErrorMessage(r);
    PQclear(r);
    if (error.empty()) {
      PQclear(PQexec(db().raw(), "DEALLOCATE harvest_statement_check"));
    }
    return error;
  }
};

TEST_F(StatementsTest, every_engine_statement_prepares_on_the_migrated_schema) {
  ASSERT_FALSE(engine::sql::kEvery.empty());
  for (const auto& [name, text] : engine::sql::kEvery) {
    EXPECT_EQ(prepare(text), "") << "engine/sql/" << name << ".sql:\n" << text;
  }
}

TEST_F(StatementsTest, every_store_statement_prepares_on_the_migrated_schema) {
  ASSERT_FALSE(store::sql::kEvery.empty());
  for (const auto& [name, text] : store::sql::kEvery) {
    EXPECT_EQ(prepare(text), "") << "store/sql/" << name << ".sql:\n" << text;
  }
}

// The connector's tables exist only where its migrations are applied (a
// build with the connector runtime).
#if HARVEST_WITH_CONNECTORS
TEST_F(StatementsTest, every_connector_statement_prepares_on_the_migrated_schema) {
  ASSERT_FALSE(connector::sql::kEvery.empty());
  for (const auto& [name, text] : connector::sql::kEvery) {
    EXPECT_EQ(prepare(text), "") << "connector/sql/" << name << ".sql:\n" << text;
  }
}

TEST_F(StatementsTest, every_connector_dlq_statement_prepares_on_the_migrated_schema) {
  ASSERT_FALSE(connector_dlq::sql::kEvery.empty());
  for (const auto& [name, text] : connector_dlq::sql::kEvery) {
    EXPECT_EQ(prepare(text), "") << "connector_dlq/sql/" << name << ".sql:\n" << text;
  }
}
#endif

TEST(WorkChannel, the_channel_workers_listen_on_is_the_one_every_notify_sends_on) {
  // LISTEN takes an identifier and pg_notify a string, so the name is written
  // twice (sql/work/listen.sql, sql/fragments/notify_work.sql).
  const std::string_view listen = engine::sql::work::listen;
  ASSERT_TRUE(listen.starts_with("LISTEN ")) << listen;
  const std::string channel(listen.substr(7));
  for (const auto& [name, text] : engine::sql::kEvery) {
    if (text.find("pg_notify(") == std::string_view::npos) continue;
    EXPECT_NE(text.find("pg_notify('" + channel + "'"), std::string_view::npos) << name;
  }
  EXPECT_NE(engine::sql::work::notify.find("pg_notify('" + channel + "'"), std::string_view::npos);
}

TEST_F(StatementsTest, a_statement_naming_a_missing_column_is_caught) {
  // The check itself: a broken statement does fail to prepare.
  EXPECT_NE(prepare("SELECT no_such_column FROM harvest_workflow_executions"), "");
}

}  // namespace
}  // namespace harvest
