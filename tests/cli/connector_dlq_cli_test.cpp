// `harvest connector-dead-letters list|show|replay|purge` against the test
// database, driven through run_cli: tables, --json in the API's shapes,
// filters, refusals without a filter, exit codes and --help. The cases call it
// by its alias `connector-dlq`, its first name; cli_test.cpp checks that both
// names answer alike.
#include <gtest/gtest.h>

#include <sstream>

#include "support/pg_fixture.hpp"
#include <harvest/cli/cli.hpp>

namespace harvest {
namespace {

using engine::Json;

class ConnectorDlqCliTest : public testing::PgTest {
 protected:
  int run(std::vector<std::string> args, bool with_db = true) {
    if (with_db) args.insert(args.begin(), {"--database-url", db_url()});
    args.insert(args.begin(), "harvest");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    out_.str("");
    err_.str("");
    return cli::run_cli(static_cast<int>(argv.size()), argv.data(), out_, err_);
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
  void expect_one_error_line(const std::string& part) {
    const std::string e = err_.str();
    EXPECT_EQ(e.rfind("error: ", 0), 0u) << e;
    EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
    EXPECT_NE(e.find(part), std::string::npos) << e;
  }
  std::string letter(const std::string& key, const std::string& binding, const std::string& reason,
                     int minutes_ago, const std::string& payload) {
    return text(
        "INSERT INTO harvest_connector_dead_letters (binding, stream, coordinates, "
        "idempotency_key, reason, detail, attempts, payload, failed_at) VALUES ($1, $2, $3, $4, "
        "$5, 'why ' || $4, 1, convert_to($6, 'UTF8'), now() - make_interval(mins => $7::int)) "
        "RETURNING id::text",
        {binding, binding + ".events", binding + ".events:0:" + key, "conn:1:" + key, reason,
         payload, std::to_string(minutes_ago)});
  }
  long long rows() { return scalar("SELECT count(*) FROM harvest_connector_dead_letters"); }
  std::vector<std::string> listed_keys() {
    std::vector<std::string> out;
    const Json listed = json_out();
    for (const auto& item : listed["items"]) out.push_back(item["idempotency_key"]);
    return out;
  }

  std::ostringstream out_, err_;
};

using Keys = std::vector<std::string>;

TEST_F(ConnectorDlqCliTest, list_prints_a_table_filters_and_json_in_the_api_shape) {
  ASSERT_EQ(run({"connector-dlq", "list"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "no connector dead letters\n");
  ASSERT_EQ(run({"connector-dlq", "list", "--json"}), 0);
  EXPECT_EQ(json_out(), (Json{{"items", Json::array()}}));

  const std::string a = letter("a", "orders", "undecodable", 1, "{oops");
  letter("b", "orders", "mapping_rejected", 2, "{}");
  letter("c", "devices", "undecodable", 3, "{}");

  ASSERT_EQ(run({"connector-dlq", "list"}), 0) << err_.str();
  EXPECT_TRUE(out_has("COORDINATES")) << out_.str();
  EXPECT_TRUE(out_has(a));
  EXPECT_TRUE(out_has("orders.events:0:a"));
  EXPECT_TRUE(out_has("why conn:1:a"));

  ASSERT_EQ(run({"connector-dlq", "list", "--json"}), 0);
  EXPECT_EQ(listed_keys(), (Keys{"conn:1:a", "conn:1:b", "conn:1:c"}));
  ASSERT_EQ(run({"connector-dlq", "list", "--binding", "orders", "--json"}), 0);
  EXPECT_EQ(listed_keys(), (Keys{"conn:1:a", "conn:1:b"}));
  ASSERT_EQ(run({"--json", "connector-dlq", "list", "--reason", "undecodable", "--limit", "1"}), 0);
  EXPECT_EQ(listed_keys(), (Keys{"conn:1:a"}));
  ASSERT_EQ(run({"connector-dlq", "list", "--stream", "devices.events", "--json"}), 0);
  EXPECT_EQ(listed_keys(), (Keys{"conn:1:c"}));
  ASSERT_EQ(run({"connector-dlq", "list", "--until", "2000-01-01T00:00:00Z", "--json"}), 0);
  EXPECT_EQ(listed_keys(), Keys{});
  const Json item = [&] {
    EXPECT_EQ(run({"connector-dlq", "list", "--binding", "devices", "--json"}), 0);
    return json_out()["items"][0];
  }();
  EXPECT_EQ(item["binding"], "devices");
  EXPECT_EQ(item["reason"], "undecodable");
  EXPECT_TRUE(item["replay_outcome"].is_null());
  EXPECT_FALSE(item.contains("payload"));

  EXPECT_EQ(run({"connector-dlq", "list", "--since", "last tuesday"}), 1);
  expect_one_error_line("'since'");
  EXPECT_EQ(run({"connector-dlq", "list", "--limit", "1001"}), 2);
  EXPECT_EQ(run({"connector-dlq", "list", "--reason", "bored"}), 2);
}

TEST_F(ConnectorDlqCliTest, show_prints_the_row_and_its_payload_and_json) {
  const std::string a = letter("a", "orders", "undecodable", 1, "{oops");
  ASSERT_EQ(run({"connector-dlq", "show", a}), 0) << err_.str();
  EXPECT_TRUE(out_has("binding:          orders")) << out_.str();
  EXPECT_TRUE(out_has("dedupe_key:       conn:1:a")) << out_.str();
  EXPECT_TRUE(out_has("payload:\n{oops\n")) << out_.str();
  ASSERT_EQ(run({"connector-dlq", "show", a, "--json"}), 0);
  Json shown = json_out();
  EXPECT_EQ(shown["id"], a);
  EXPECT_EQ(shown["payload"], "{oops");
  EXPECT_EQ(shown["payload_base64"], "e29vcHM=");

  EXPECT_EQ(run({"connector-dlq", "show", "00000000-0000-0000-0000-000000000000"}), 1);
  expect_one_error_line("no connector dead letter");
  EXPECT_EQ(run({"connector-dlq", "show", "nope"}), 1);
  expect_one_error_line("'id'");
  EXPECT_EQ(run({"connector-dlq", "show"}), 2);
}

TEST_F(ConnectorDlqCliTest, replay_marks_rows_once_with_who_and_refuses_without_a_filter) {
  const std::string a = letter("a", "orders", "mapping_rejected", 1, "{}");
  letter("b", "devices", "mapping_rejected", 1, "{}");

  EXPECT_EQ(run({"connector-dlq", "replay"}), 2);
  expect_one_error_line("explicit filter");
  ASSERT_EQ(run({"connector-dlq", "replay", "--binding", "orders", "--by", "alice"}), 0)
      << err_.str();
  EXPECT_TRUE(out_has("marked 1 for replay (0 already waiting, 0 already replayed)")) << out_.str();
  ASSERT_EQ(run({"connector-dlq", "replay", a, "--json"}), 0);
  EXPECT_EQ(json_out(),
            (Json{{"requested", 0}, {"already_requested", 1}, {"already_replayed", 0}}));
  ASSERT_EQ(run({"connector-dlq", "show", a, "--json"}), 0);
  EXPECT_EQ(json_out()["replay_requested_by"], "alice");
  ASSERT_EQ(run({"connector-dlq", "list", "--binding", "orders"}), 0);
  EXPECT_TRUE(out_has("requested")) << out_.str();

  // Without --by the CLI records the operating user.
  setenv("USER", "dana", 1);
  ASSERT_EQ(run({"connector-dlq", "replay", "--binding", "devices"}), 0);
  ASSERT_EQ(run({"connector-dlq", "list", "--binding", "devices", "--json"}), 0);
  EXPECT_EQ(json_out()["items"][0]["replay_requested_by"], "cli:dana");
}

TEST_F(ConnectorDlqCliTest, purge_needs_a_filter_and_deletes_exactly_the_matches) {
  const std::string a = letter("a", "orders", "undecodable", 1, "x");
  letter("b", "orders", "mapping_rejected", 2, "y");
  letter("c", "devices", "undecodable", 3, "z");

  EXPECT_EQ(run({"connector-dlq", "purge"}), 2);
  expect_one_error_line("explicit filter");
  EXPECT_EQ(rows(), 3);
  ASSERT_EQ(run({"connector-dlq", "purge", "--binding", "orders", "--reason", "undecodable"}), 0)
      << err_.str();
  EXPECT_EQ(out_.str(), "purged 1\n");
  ASSERT_EQ(run({"connector-dlq", "purge", "--reason", "undecodable", "--json"}), 0);
  EXPECT_EQ(json_out(), (Json{{"purged", 1}}));
  ASSERT_EQ(run({"connector-dlq", "list", "--json"}), 0);
  EXPECT_EQ(listed_keys(), (Keys{"conn:1:b"}));
  ASSERT_EQ(run({"connector-dlq", "purge", a}), 0);
  EXPECT_EQ(out_.str(), "purged 0\n") << "already gone";
  EXPECT_EQ(rows(), 1);
}

TEST_F(ConnectorDlqCliTest, help_lists_every_subcommand_and_usage_errors_exit_2) {
  EXPECT_EQ(run({"connector-dlq", "--help"}, false), 0);
  for (const char* sub : {"list", "show", "replay", "purge"}) {
    EXPECT_TRUE(out_has(sub)) << sub << ": " << out_.str();
  }
  EXPECT_EQ(run({"connector-dlq", "replay", "--help"}, false), 0);
  EXPECT_TRUE(out_has("--binding")) << out_.str();
  EXPECT_TRUE(out_has("--by")) << out_.str();
  EXPECT_EQ(run({"--help"}, false), 0);
  EXPECT_TRUE(out_has("connector-dlq")) << out_.str();
  EXPECT_EQ(run({"connector-dlq"}), 2);
  EXPECT_EQ(run({"connector-dlq", "frobnicate"}), 2);
  EXPECT_EQ(
      run({"connector-dlq", "list", "--database-url", "postgresql://x@127.0.0.1:1/none"}, false),
      1);
  expect_one_error_line("error: ");
}

}  // namespace
}  // namespace harvest
