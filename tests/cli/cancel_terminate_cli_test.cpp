// ENG-17 on the command line: `harvest executions cancel|terminate`, one run
// by id or a workflow's open runs after a count preview and --yes.
#include <gtest/gtest.h>

#include <sstream>

#include "support/pg_fixture.hpp"
#include <harvest/cli/cli.hpp>
#include <harvest/engine/engine.hpp>

namespace harvest {
namespace {

using engine::Json;

class CancelTerminateCliTest : public testing::PgTest {
 protected:
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), {"harvest", "--database-url", db_url()});
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    out_.str("");
    err_.str("");
    return cli::run_cli(static_cast<int>(argv.size()), argv.data(), out_, err_);
  }
  std::string status_of(const std::string& id) {
    return text(::harvest::testing::kStatusById, {id});
  }
  std::ostringstream out_, err_;
};

TEST_F(CancelTerminateCliTest, cancel_and_terminate_one_run_by_id) {
  engine::WorkflowRegistry r;
  r.add("w", [](engine::WorkflowContext&, int n) { return n; });
  auto engine = open_engine(std::move(r));
  auto a = engine->start({.workflow = "w", .input = 1});
  auto b = engine->start({.workflow = "w", .input = 2});
  ASSERT_TRUE(a && b);

  ASSERT_EQ(run({"executions", "cancel", *a->execution_id, "--reason", "wrong customer"}), 0)
      << err_.str();
  EXPECT_NE(out_.str().find("cancel requested"), std::string::npos) << out_.str();
  EXPECT_EQ(text("SELECT cancel_reason FROM harvest_workflow_executions WHERE id = $1",
                 {*a->execution_id}),
            "wrong customer");
  EXPECT_EQ(text("SELECT payload->>'requested_by' FROM harvest_workflow_events WHERE "
                 "execution_id = $1 AND kind = 'CancelRequested'",
                 {*a->execution_id})
                .rfind("cli:", 0),
            0u);

  ASSERT_EQ(run({"executions", "terminate", *b->execution_id, "--reason", "stuck", "--json"}), 0)
      << err_.str();
  EXPECT_EQ(Json::parse(out_.str()), (Json{{"execution_id", *b->execution_id},
                                           {"outcome", "terminated"},
                                           {"status", "terminated"}}));
  EXPECT_EQ(status_of(*b->execution_id), "terminated");

  // A closed run is refused with one error line and exit 1.
  EXPECT_EQ(run({"executions", "cancel", *b->execution_id, "--reason", "x"}), 1);
  EXPECT_EQ(err_.str().rfind("error: ", 0), 0u) << err_.str();
  EXPECT_NE(err_.str().find("terminated"), std::string::npos) << err_.str();
  // A reason is required; an id and a filter together are a usage error.
  EXPECT_EQ(run({"executions", "cancel", *a->execution_id}), 2);
  EXPECT_EQ(run({"executions", "cancel", *a->execution_id, "--workflow", "w", "--reason", "x"}), 2);
}

TEST_F(CancelTerminateCliTest, bulk_terminate_previews_the_count_until_yes) {
  engine::WorkflowRegistry r;
  r.add("w", [](engine::WorkflowContext&, int n) { return n; });
  auto engine = open_engine(std::move(r));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine->start({.workflow = "w", .input = i}));

  ASSERT_EQ(run({"executions", "terminate", "--workflow", "w", "--reason", "bad release"}), 0)
      << err_.str();
  EXPECT_NE(out_.str().find("4 open run(s) of w match; run again with --yes"), std::string::npos)
      << out_.str();
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'pending'"), 4);

  ASSERT_EQ(run({"executions", "terminate", "--workflow", "w", "--status", "pending", "--reason",
                 "bad release", "--yes", "--json"}),
            0)
      << err_.str();
  EXPECT_EQ(Json::parse(out_.str()), (Json{{"matched", 4}, {"terminated", 4}, {"dry_run", false}}));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE status = 'terminated'"),
            4);
  EXPECT_EQ(
      run({"executions", "cancel", "--workflow", "w", "--status", "completed", "--reason", "x"}), 2)
      << "a closed status is not a choice";
}

}  // namespace
}  // namespace harvest
