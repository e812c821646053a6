// The `harvest` CLI's engine commands (executions, dead-letters, shards)
// against the test database, driven through run_cli: exit codes, tables,
// --json, errors. Most dead-letter cases here call `dlq`, the alias kept from
// the command's first name; one test checks both names answer alike.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <sstream>

#include "support/pg_fixture.hpp"
#include <harvest/cli/cli.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/migrations.hpp>

namespace harvest {
namespace {

using namespace std::chrono_literals;
using engine::Json;
using engine::WorkflowContext;

class CliTest : public testing::PgTest {
 protected:
  void TearDown() override {
    if (!extra_db_.empty()) {
      if (auto admin = store::Connection::open(testing::admin_url())) {
        (void)(*admin)->exec("DROP DATABASE IF EXISTS " + store::quote_ident(extra_db_) +
                             " WITH (FORCE)");
      }
    }
    PgTest::TearDown();
  }

  // Runs `harvest <args...>` (no implicit database flag).
  int raw(std::vector<std::string> args) {
    args.insert(args.begin(), "harvest");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    out_.str("");
    err_.str("");
    return cli::run_cli(static_cast<int>(argv.size()), argv.data(), out_, err_);
  }
  // Runs `harvest --database-url <this test's db> <args...>`.
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--database-url", db_url()});
    return raw(std::move(args));
  }
  Json json_out() {
    try {
      return Json::parse(out_.str());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "--json output does not parse (" << e.what() << "): " << out_.str();
      return Json();
    }
  }
  bool out_has(const std::string& s) const { return out_.str().find(s) != std::string::npos; }
  // The error output is exactly one line starting with "error: ".
  void expect_one_error_line(const std::string& part) {
    std::string e = err_.str();
    EXPECT_EQ(e.rfind("error: ", 0), 0u) << e;
    EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
    EXPECT_NE(e.find(part), std::string::npos) << e;
  }

  // A second migrated database on the test cluster, for a second shard.
  std::string second_database() {
    extra_db_ = "harvest_t2_" + new_uuid().substr(0, 8);
    auto admin = store::Connection::open(testing::admin_url());
    EXPECT_TRUE(admin);
    EXPECT_TRUE((*admin)->exec("CREATE DATABASE " + store::quote_ident(extra_db_)));
    std::string url = testing::with_database(testing::admin_url(), extra_db_);
    auto conn = store::Connection::open(url);
    EXPECT_TRUE(conn);
    auto applied = store::apply_migrations(**conn, plugin::all_migration_sets());
    EXPECT_TRUE(applied) << applied.error().message;
    return url;
  }

  std::ostringstream out_, err_;
  std::string extra_db_;
};

engine::WorkflowRegistry workflows(std::shared_ptr<std::atomic<bool>> succeed = nullptr) {
  engine::WorkflowRegistry r;
  r.add("greet", [](WorkflowContext& ctx, Json in) {
    return ctx.step("compose", [&] { return "Hello, " + in.value("name", "?"); });
  });
  r.add("other", [](WorkflowContext&, Json) { return 0; });
  r.add(
      "charge",
      [succeed](WorkflowContext& ctx, Json) {
        return ctx.step("charge_card", [&] {
          if (!succeed || !*succeed) throw std::runtime_error("card declined");
          return 1;
        });
      },
      engine::WorkflowOptions{.max_attempts = 2, .retry_backoff = 10ms});
  return r;
}

std::string start(engine::Engine& e, const std::string& workflow,
                  std::optional<std::string> workflow_id = std::nullopt) {
  auto r = e.start(engine::StartRequest{
      .workflow = workflow, .workflow_id = std::move(workflow_id), .input = Json{{"name", "Ada"}}});
  EXPECT_TRUE(r) << r.error().message;
  return r ? r->execution_id.value_or("") : "";
}

TEST_F(CliTest, executions_list_prints_a_table_pages_and_filters_for_any_workflow_name) {
  auto engine = open_engine(workflows());
  std::vector<std::string> greets;
  for (int i = 0; i < 3; ++i) greets.push_back(start(*engine, "greet"));
  std::string other = start(*engine, "other", "acct-1");

  ASSERT_EQ(run({"executions", "list"}), 0) << err_.str();
  EXPECT_TRUE(out_has("EXECUTION")) << out_.str();
  EXPECT_TRUE(out_has("WORKFLOW_ID")) << out_.str();
  for (const auto& id : greets) EXPECT_TRUE(out_has(id)) << out_.str();
  EXPECT_TRUE(out_has(other));
  EXPECT_TRUE(out_has("acct-1"));
  EXPECT_TRUE(out_has("pending"));

  ASSERT_EQ(run({"executions", "list", "--workflow", "greet", "--limit", "2", "--json"}), 0)
      << err_.str();
  Json page = json_out();
  ASSERT_EQ(page["items"].size(), 2u) << page.dump();
  ASSERT_TRUE(page["next_cursor"].is_string()) << page.dump();
  EXPECT_EQ(page["items"][0]["workflow"], "greet");
  ASSERT_EQ(run({"executions", "list", "--workflow", "greet", "--limit", "2", "--cursor",
                 page["next_cursor"].get<std::string>(), "--json"}),
            0);
  Json last = json_out();
  ASSERT_EQ(last["items"].size(), 1u);
  EXPECT_EQ(last["next_cursor"], nullptr);

  // A table listing with more pages says how to get the next one.
  ASSERT_EQ(run({"executions", "list", "--limit", "1"}), 0);
  EXPECT_TRUE(out_has("more: --cursor")) << out_.str();

  ASSERT_EQ(run({"executions", "list", "--status", "completed"}), 0);
  EXPECT_EQ(out_.str(), "no executions\n");
  EXPECT_EQ(run({"executions", "list", "--limit", "0"}), 2);
}

TEST_F(CliTest, executions_show_prints_fields_and_history_and_json) {
  auto engine = open_engine(workflows());
  std::string id = start(*engine, "greet", "ada");
  engine::Worker worker(*engine);
  ASSERT_TRUE(eventually([&] {
    (void)worker.run_one();
    auto v = engine->get_execution(id);
    return v && v->status == "completed";
  }));

  ASSERT_EQ(run({"executions", "show", id}), 0) << err_.str();
  EXPECT_TRUE(out_has("status:          completed")) << out_.str();
  EXPECT_TRUE(out_has("workflow_id:     ada")) << out_.str();
  EXPECT_TRUE(out_has("output:          \"Hello, Ada\"")) << out_.str();
  EXPECT_TRUE(out_has("history:")) << out_.str();
  EXPECT_TRUE(out_has("WorkflowStarted")) << out_.str();
  EXPECT_TRUE(out_has("StepCompleted")) << out_.str();

  ASSERT_EQ(run({"executions", "show", id, "--json"}), 0);
  Json v = json_out();
  EXPECT_EQ(v["execution_id"], id);
  EXPECT_EQ(v["status"], "completed");
  EXPECT_EQ(v["output"], "Hello, Ada");
  EXPECT_GE(v["history"].size(), 2u);

  EXPECT_EQ(run({"executions", "show", "6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00"}), 1);
  expect_one_error_line("6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(run({"executions", "show"}), 2);
}

TEST_F(CliTest, dlq_list_and_replay_a_run_that_exhausted_its_retries) {
  auto succeed = std::make_shared<std::atomic<bool>>(false);
  auto engine = open_engine(workflows(succeed));
  std::string id = start(*engine, "charge", "invoice-3");
  engine::Worker worker(*engine);
  ASSERT_TRUE(eventually([&] {
    (void)worker.run_one();
    auto dead = engine->list_dead_letters();
    return dead && dead->size() == 1;
  }));

  ASSERT_EQ(run({"dlq", "list"}), 0) << err_.str();
  EXPECT_TRUE(out_has("ATTEMPTS")) << out_.str();
  EXPECT_TRUE(out_has(id)) << out_.str();
  EXPECT_TRUE(out_has("invoice-3"));
  EXPECT_TRUE(out_has("card declined"));

  ASSERT_EQ(run({"dlq", "list", "--json"}), 0);
  Json dead = json_out();
  ASSERT_EQ(dead["items"].size(), 1u);
  EXPECT_EQ(dead["items"][0]["execution_id"], id);
  EXPECT_EQ(dead["items"][0]["attempts"], 2);

  succeed->store(true);
  ASSERT_EQ(run({"dlq", "replay", id}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "replayed " + id + "\n");
  ASSERT_TRUE(eventually([&] {
    (void)worker.run_one();
    auto v = engine->get_execution(id);
    return v && v->status == "completed";
  }));
  ASSERT_EQ(run({"dlq", "list"}), 0);
  EXPECT_EQ(out_.str(), "no dead letters\n");
  ASSERT_EQ(run({"dlq", "list", "--json"}), 0);
  EXPECT_EQ(json_out(), (Json{{"items", Json::array()}}));

  EXPECT_EQ(run({"dlq", "replay", id}), 1);
  expect_one_error_line(id);
  EXPECT_EQ(run({"--json", "dlq", "replay", "6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00"}), 1);
  expect_one_error_line("error: ");
}

// The dead-letter commands are named like their HTTP routes; `dlq` and
// `connector-dlq`, the names they had first, still answer, the same way.
TEST_F(CliTest, dead_letter_commands_answer_to_their_route_names_and_their_old_aliases) {
  const std::vector<std::pair<std::string, std::string>> names = {
      {"dead-letters", "dlq"}, {"connector-dead-letters", "connector-dlq"}};
  for (const auto& [name, alias] : names) {
    ASSERT_EQ(run({name, "list", "--json"}), 0) << name << ": " << err_.str();
    EXPECT_EQ(json_out(), (Json{{"items", Json::array()}})) << name;
    ASSERT_EQ(run({alias, "list", "--json"}), 0) << alias << ": " << err_.str();
    EXPECT_EQ(json_out(), (Json{{"items", Json::array()}})) << alias;
    EXPECT_EQ(raw({alias, "--help"}), 0) << alias;
    EXPECT_TRUE(out_has("Usage: harvest " + name)) << "the alias's help names " << name << "\n"
                                                   << out_.str();
  }
  EXPECT_EQ(raw({"--help"}), 0);
  EXPECT_TRUE(out_has("dead-letters, dlq")) << out_.str();
  EXPECT_TRUE(out_has("connector-dead-letters, connector-dlq")) << out_.str();
}

// Secrets stay out of output: `harvest shards` shows where a shard is,
// never its password, for URL and keyword connection strings alike (here
// unreachable, so each is probed and its error shown too).
TEST_F(CliTest, shards_never_print_a_password_in_any_connection_string_form) {
  for (const std::string url :
       {"host=127.0.0.1 port=1 user=app password=hunter2 dbname=orders connect_timeout=2",
        "postgresql://app:hunter2@127.0.0.1:1/orders?sslpassword=hunter2&connect_timeout=2"}) {
    int rc = raw({"--database-url", url, "shards", "--json"});
    EXPECT_NE(rc, 0);
    EXPECT_EQ(out_.str().find("hunter2"), std::string::npos) << out_.str();
    EXPECT_EQ(err_.str().find("hunter2"), std::string::npos) << err_.str();
    EXPECT_NE(out_.str().find("orders"), std::string::npos) << out_.str();
  }
}

TEST_F(CliTest, shards_reports_every_shard_as_table_and_json) {
  ASSERT_EQ(run({"shards"}), 0) << err_.str();
  EXPECT_TRUE(out_has("LOCATION")) << out_.str();
  EXPECT_TRUE(out_has(db_name_)) << out_.str();
  EXPECT_TRUE(out_has("yes")) << out_.str();

  std::string second = second_database();
  ASSERT_EQ(raw({"--shard-urls", db_url() + "," + second, "shards", "--json"}), 0) << err_.str();
  Json j = json_out();
  ASSERT_EQ(j["shards"].size(), 2u) << j.dump();
  EXPECT_EQ(j["shards"][0]["index"], 0);
  EXPECT_EQ(j["shards"][1]["index"], 1);
  EXPECT_NE(j["shards"][0]["location"].get<std::string>().find(db_name_), std::string::npos);
  EXPECT_NE(j["shards"][1]["location"].get<std::string>().find(extra_db_), std::string::npos);
  EXPECT_EQ(j["shards"][0]["readable"], true);
  EXPECT_EQ(j["shards"][1]["readable"], true);

  ASSERT_EQ(raw({"--shard-urls", db_url() + "," + second, "shards"}), 0);
  EXPECT_TRUE(out_has(extra_db_)) << out_.str();

  // The shard list also comes from the environment.
  ASSERT_EQ(setenv("HARVEST_SHARD_URLS", (db_url() + "," + second).c_str(), 1), 0);
  int rc = raw({"shards", "--json"});
  unsetenv("HARVEST_SHARD_URLS");
  ASSERT_EQ(rc, 0) << err_.str();
  EXPECT_EQ(json_out()["shards"].size(), 2u);
}

TEST_F(CliTest, shards_names_the_unreachable_shard_and_exits_1) {
  const std::string down = "postgresql://someone:secret@127.0.0.1:1/gone";
  EXPECT_EQ(raw({"--shard-urls", db_url() + "," + down, "shards"}), 1);
  EXPECT_TRUE(out_has("127.0.0.1:1/gone")) << out_.str();
  EXPECT_FALSE(out_has("secret")) << "no credentials in the location: " << out_.str();
  EXPECT_TRUE(out_has("no")) << out_.str();
  expect_one_error_line("1 of 2 shards not readable");

  EXPECT_EQ(raw({"--shard-urls", db_url() + "," + down, "shards", "--json"}), 1);
  Json j = json_out();
  ASSERT_EQ(j["shards"].size(), 2u);
  EXPECT_EQ(j["shards"][0]["readable"], true);
  EXPECT_EQ(j["shards"][1]["readable"], false);
  EXPECT_EQ(j["shards"][1]["location"], "127.0.0.1:1/gone");
  EXPECT_NE(j["shards"][1]["error"].get<std::string>().find("connect"), std::string::npos);
}

TEST_F(CliTest, unreachable_database_is_one_error_line_and_exit_1_for_every_command) {
  const std::string bad = "postgresql://x@127.0.0.1:1/none";
  for (std::vector<std::string> cmd : {std::vector<std::string>{"executions", "list"},
                                       {"executions", "show", "x"},
                                       {"dlq", "list"},
                                       {"dlq", "replay", "x"},
                                       {"shards"},
                                       {"migrate"}}) {
    cmd.insert(cmd.begin(), {"--database-url", bad});
    EXPECT_EQ(raw(cmd), 1) << cmd[2];
    expect_one_error_line("error: ");
    // `shards` still prints its table, naming the unreachable shard.
    if (cmd[2] != "shards") {
      EXPECT_EQ(out_.str(), "") << cmd[2];
    }
  }
}

TEST_F(CliTest, usage_errors_exit_2) {
  unsetenv("HARVEST_DATABASE_URL");
  unsetenv("HARVEST_HARVEST_DATABASE_URL");
  unsetenv("HARVEST_SHARD_URLS");
  unsetenv("HARVEST_PROFILE");
  EXPECT_EQ(raw({"executions", "list"}), 2);
  EXPECT_NE(err_.str().find("error: no database"), std::string::npos) << err_.str();
  EXPECT_EQ(run({"executions"}), 2);
  EXPECT_EQ(run({"dlq"}), 2);
  EXPECT_EQ(run({"dlq", "replay"}), 2);
  EXPECT_EQ(run({"frobnicate"}), 2);
  EXPECT_EQ(raw({"--help"}), 0);
  EXPECT_NE(out_.str().find("executions"), std::string::npos) << out_.str();
}

// Every command answers --help (exit 0, no database needed) and its help
// names --json, the machine-readable form each one prints.
TEST_F(CliTest, every_command_has_help_naming_json) {
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"migrate"},
                                             {"executions", "list"},
                                             {"executions", "show"},
                                             {"dlq", "list"},
                                             {"dlq", "replay"},
                                             {"connector-dlq", "list"},
                                             {"connector-dlq", "show"},
                                             {"connector-dlq", "replay"},
                                             {"connector-dlq", "purge"},
                                             {"connectors", "status"},
                                             {"shards"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    std::string joined;
    for (const auto& a : cmd) joined += a + " ";
    EXPECT_EQ(raw(args), 0) << joined << err_.str();
    EXPECT_NE(out_.str().find("--json"), std::string::npos) << joined << out_.str();
  }
  EXPECT_EQ(raw({"executions", "list", "--help"}), 0);
  for (const char* filter : {"--workflow", "--status", "--start-source"}) {
    EXPECT_NE(out_.str().find(filter), std::string::npos) << filter << out_.str();
  }
}

}  // namespace
}  // namespace harvest
