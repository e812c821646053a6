// The web console: what it reads and how its pages are served — the pages
// under /ui with a strict Content-Security-Policy, the overview, the
// execution filters (workflow id and prefix, broker coordinates, time range)
// and the execution's detail (times, lease, unread signals, the entity's
// runs, the trace link).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "api_fixture.hpp"
#include <harvest/common/trace_context.hpp>

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;

class ConsoleApiTest : public testing::ApiTest {
 protected:
  static std::string path(const std::string& rest) { return std::string(kPrefix) + rest; }

  static engine::WorkflowRegistry workflows() {
    engine::WorkflowRegistry r;
    r.add("a", [](WorkflowContext&, int n) { return n; });
    r.add("b", [](WorkflowContext&, int n) { return n; });
    return r;
  }

  // A run started as a connector would: with provenance and a trace.
  std::string start(const std::string& workflow, std::optional<std::string> workflow_id,
                    std::optional<std::string> ref = std::nullopt,
                    std::optional<TraceContext> trace = std::nullopt) {
    engine::StartRequest req;
    req.workflow = workflow;
    req.workflow_id = std::move(workflow_id);
    req.input = 1;
    req.source = engine::StartSource::kBroker;
    req.source_ref = std::move(ref);
    req.trace = std::move(trace);
    auto r = engine_->start(req);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? r->execution_id.value_or("") : "";
  }

  // The console's scripts: app.js and every module it imports, in turn,
  // each answered 200 as JavaScript (name -> text).
  static std::map<std::string, std::string> served_modules(httplib::Client& c) {
    std::map<std::string, std::string> out;
    std::vector<std::string> todo{"app.js"};
    while (!todo.empty()) {
      const std::string name = todo.back();
      todo.pop_back();
      if (out.contains(name)) continue;
      auto r = c.Get("/ui/" + name);
      EXPECT_TRUE(r && r->status == 200) << name;
      if (!r || r->status != 200) continue;
      EXPECT_EQ(r->get_header_value("Content-Type"), "text/javascript; charset=utf-8") << name;
      out[name] = r->body;
      for (size_t at = 0; (at = r->body.find("from './", at)) != std::string::npos;) {
        at += 8;
        todo.push_back(r->body.substr(at, r->body.find('\'', at) - at));
      }
    }
    return out;
  }

  std::vector<std::string> listed(const std::string& query) {
    auto r = get(path("/executions?" + query));
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    std::vector<std::string> ids;
    const Json page = body(r);
    for (const auto& item : page["items"]) {
      ids.push_back(item["workflow_id"].is_null() ? "" : item["workflow_id"].get<std::string>());
    }
    return ids;
  }
};

TEST_F(ConsoleApiTest, the_pages_are_served_under_ui_with_a_strict_policy_and_no_token) {
  api::ApiConfig config;
  config.token = "secret-token";
  serve(workflows(), {}, config);
  auto c = client();
  auto page = c.Get("/ui/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200) << "the page itself holds no data and asks for the token";
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  const std::string csp = page->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page->get_header_value("X-Frame-Options"), "DENY");
  EXPECT_NE(page->body.find("<script type=\"module\" src=\"app.js\">"), std::string::npos);

  // Every module the page loads, from app.js through its imports, is
  // served as JavaScript, and data is only ever set as text: no module
  // parses markup.
  const auto modules = served_modules(c);
  EXPECT_GE(modules.size(), 5u);
  for (const auto& [name, script] : modules) {
    for (const char* sink : {".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write"}) {
      EXPECT_EQ(script.find(sink), std::string::npos) << name << ": " << sink;
    }
  }
  // The stylesheets: one cascade in four files, linked in this order (a
  // later sheet wins a tie), each served as CSS.
  std::vector<std::string> sheets;
  constexpr std::string_view kSheet = "<link rel=\"stylesheet\" href=\"";
  for (size_t at = 0; (at = page->body.find(kSheet, at)) != std::string::npos;) {
    at += kSheet.size();
    sheets.push_back(page->body.substr(at, page->body.find('"', at) - at));
  }
  EXPECT_EQ(sheets, (std::vector<std::string>{"base.css", "tables.css", "forms.css", "views.css"}));
  for (const auto& name : sheets) {
    auto sheet = c.Get("/ui/" + name);
    ASSERT_TRUE(sheet) << name;
    EXPECT_EQ(sheet->status, 200) << name;
    EXPECT_EQ(sheet->get_header_value("Content-Type"), "text/css; charset=utf-8") << name;
    EXPECT_NE(sheet->body.find('{'), std::string::npos) << name;
  }
  auto bare = c.Get("/ui");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 308);
  EXPECT_EQ(bare->get_header_value("Location"), "/ui/");
  EXPECT_EQ(c.Get("/ui/missing.js")->status, 404);
  EXPECT_EQ(c.Post("/ui/", "{}", "application/json")->status, 405);
  // The API behind the pages still needs the token, and says nothing else.
  auto api = c.Get(path("/overview"));
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
  EXPECT_EQ(api->body.find("secret-token"), std::string::npos);
  EXPECT_EQ(api->get_header_value("X-Content-Type-Options"), "nosniff");
}

// The page carries the API prefix the server was given, as inert attribute
// text, and its script calls that prefix (under the path the page was served
// from) rather than a fixed /api/harvest.
TEST_F(ConsoleApiTest, the_page_carries_the_servers_api_prefix_escaped) {
  api::ApiConfig config;
  config.prefix = "/tools/h&q\"<b>";
  serve(workflows(), {}, config);
  auto page = client().Get("/ui/");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  EXPECT_NE(page->body.find(
                R"(<meta name="harvest-api-prefix" content="/tools/h&amp;q&quot;&lt;b&gt;">)"),
            std::string::npos)
      << page->body;
  EXPECT_EQ(page->body.find("/api/harvest"), std::string::npos);
  auto c = client();
  bool reads_the_prefix = false;
  for (const auto& [name, script] : served_modules(c)) {
    reads_the_prefix |=
        script.find(R"(document.querySelector('meta[name="harvest-api-prefix"]'))") !=
        std::string::npos;
  }
  EXPECT_TRUE(reads_the_prefix) << "the script takes the prefix from the page";
}

TEST_F(ConsoleApiTest, the_default_page_names_the_default_prefix) {
  serve(workflows());
  auto page = client().Get("/ui/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find(R"(<meta name="harvest-api-prefix" content="/api/harvest">)"),
            std::string::npos);
}

// Each status filter answers exactly the runs shown in that status — a held
// run as running (found from its lease), a pending or waiting one only
// while no worker holds it — and an unknown status is a 400 naming the ones
// there are.
TEST_F(ConsoleApiTest, every_status_filter_lists_exactly_the_runs_in_that_status) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  engine::WorkflowRegistry r;
  r.add("done", [](WorkflowContext&, int n) { return n; });
  r.add(
      "fails", [](WorkflowContext&, int) -> int { throw std::runtime_error("no"); },
      engine::WorkflowOptions{.max_attempts = 1});
  r.add("waits", [](WorkflowContext& ctx, int) {
    (void)ctx.wait_signal("never", std::chrono::hours(1));
    return 0;
  });
  r.add("holds", [release](WorkflowContext& ctx, int) {
    return ctx.step("hold", [&] {
      while (!*release) std::this_thread::sleep_for(10ms);
      return 1;
    });
  });
  serve(std::move(r));
  start_worker();  // two runs at a time
  auto status_of = [&](const std::string& id) {
    return body(get(path("/executions/" + id)))["status"].get<std::string>();
  };
  std::map<std::string, std::string> ids;
  for (std::string name : {"done", "fails", "waits", "waits-c", "waits-t"}) {
    ids[name] = start(name.substr(0, name.find('-')), name);
  }
  ASSERT_TRUE(eventually([&] {
    return status_of(ids["done"]) == "completed" && status_of(ids["fails"]) == "failed" &&
           status_of(ids["waits"]) == "waiting" && status_of(ids["waits-c"]) == "waiting" &&
           status_of(ids["waits-t"]) == "waiting";
  }));
  const Json why{{"reason", "test"}};
  ASSERT_EQ(post(path("/executions/" + ids["waits-c"] + "/cancel"), why)->status, 202);
  ASSERT_EQ(post(path("/executions/" + ids["waits-t"] + "/terminate"), why)->status, 200);
  ids["holds-1"] = start("holds", "holds-1");
  ids["holds-2"] = start("holds", "holds-2");
  ASSERT_TRUE(eventually([&] {
    return status_of(ids["holds-1"]) == "running" && status_of(ids["holds-2"]) == "running" &&
           status_of(ids["waits-c"]) == "cancelled";
  }));
  ids["pending"] = start("done", "pending");  // both of the worker's slots are held
  using Ids = std::vector<std::string>;
  EXPECT_EQ(listed("status=pending"), (Ids{"pending"}));
  EXPECT_EQ(listed("status=running"), (Ids{"holds-2", "holds-1"}));
  EXPECT_EQ(listed("status=waiting"), (Ids{"waits"}));
  EXPECT_EQ(listed("status=completed"), (Ids{"done"}));
  EXPECT_EQ(listed("status=failed"), (Ids{"fails"}));
  EXPECT_EQ(listed("status=cancelled"), (Ids{"waits-c"}));
  EXPECT_EQ(listed("status=terminated"), (Ids{"waits-t"}));
  EXPECT_EQ(listed("status=running&workflow=holds&limit=1"), (Ids{"holds-2"}));
  EXPECT_EQ(listed("status=running&workflow=done"), Ids{});
  auto unknown = get(path("/executions?status=stuck"));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_NE(unknown->body.find("terminated"), std::string::npos) << unknown->body;
  release->store(true);
  ASSERT_TRUE(eventually([&] { return status_of(ids["pending"]) == "completed"; }));
}

// The overview's charts read the last hour from what harvest keeps itself —
// runs per minute from the executions table, each binding's lag as sampled
// in this process.
TEST_F(ConsoleApiTest, the_history_counts_the_last_hour_per_minute_and_samples_each_lag) {
  auto lag = std::make_shared<std::atomic<int64_t>>(40);
  api::ApiConfig config;
  config.lag_sample_interval = 100ms;
  config.bindings = [lag] {
    BindingOverview b;
    b.binding = "orders";
    b.lag = lag->fetch_sub(10);  // 40, 30, 20, ... per sample
    return std::vector<BindingOverview>{b};
  };
  engine::WorkflowRegistry r;
  r.add("a", [](WorkflowContext&, int n) { return n; });
  r.add(
      "f", [](WorkflowContext&, int) -> int { throw std::runtime_error("no"); },
      engine::WorkflowOptions{.max_attempts = 1});
  serve(std::move(r), {}, config);
  for (int i = 0; i < 3; ++i) start("a", std::nullopt);
  start("f", std::nullopt);
  start_worker();
  ASSERT_TRUE(eventually([&] {
    return scalar(
               "SELECT count(*) FROM harvest_workflow_executions WHERE status IN "
               "('completed', 'failed')") == 4;
  }));
  std::this_thread::sleep_for(350ms);  // three samples or more
  auto h = get(path("/overview/history"));
  ASSERT_TRUE(h);
  ASSERT_EQ(h->status, 200) << h->body;
  Json j = body(h);
  ASSERT_EQ(j["minutes"].size(), 60u);
  long long started = 0, completed = 0, failed = 0;
  std::string previous;
  for (const auto& m : j["minutes"]) {
    started += m["started"].get<long long>();
    completed += m["completed"].get<long long>();
    failed += m["failed"].get<long long>();
    EXPECT_GT(m["at"].get<std::string>(), previous) << "oldest first";
    previous = m["at"];
  }
  EXPECT_EQ(started, 4);
  EXPECT_EQ(completed, 3);
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(j["minutes"].back()["at"].get<std::string>().substr(17), "00Z") << "whole minutes";
  ASSERT_EQ(j["lag"].size(), 1u);
  EXPECT_EQ(j["lag"][0]["binding"], "orders");
  const Json& points = j["lag"][0]["points"];
  ASSERT_GE(points.size(), 3u);
  EXPECT_EQ(points[0]["lag"], 40);
  EXPECT_EQ(points[1]["lag"], 30);
  EXPECT_EQ(points[2]["lag"], 20);
  EXPECT_EQ(get(path("/overview/history?minutes=5"))->status, 400) << "no parameters";
}

TEST_F(ConsoleApiTest, the_console_can_be_turned_off) {
  api::ApiConfig config;
  config.console = false;
  serve(workflows(), {}, config);
  auto page = client().Get("/ui/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 404);
}

TEST_F(ConsoleApiTest, the_overview_counts_runs_by_workflow_and_status_and_recent_starts) {
  serve(workflows());
  for (int i = 0; i < 3; ++i) start("a", std::nullopt);
  start("b", "b-1");
  auto r = get(path("/overview"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = body(r);
  EXPECT_EQ(j["runs"], Json::parse(R"([{"workflow":"a","status":"pending","count":3},
                                       {"workflow":"b","status":"pending","count":1}])"));
  EXPECT_EQ(j["window_seconds"], 60);
  EXPECT_EQ(j["started"], 4);
  EXPECT_EQ(j["completed"], 0);
  EXPECT_DOUBLE_EQ(j["started_per_second"].get<double>(), 4.0 / 60);
  start_worker();
  ASSERT_TRUE(eventually([&] { return body(get(path("/overview")))["completed"] == 4; }));
  EXPECT_EQ(body(get(path("/overview")))["runs"][0]["status"], "completed");
  EXPECT_EQ(get(path("/overview?window_seconds=0"))->status, 400);
  EXPECT_EQ(get(path("/overview?window_seconds=3601"))->status, 400);
  EXPECT_EQ(get(path("/overview?window=60"))->status, 400) << "an unknown parameter";
}

TEST_F(ConsoleApiTest, executions_are_found_by_workflow_id_prefix_coordinates_and_time) {
  serve(workflows());
  start("a", "cust-1", "orders:0:7");
  start("a", "cust-2", "orders:1:3");
  start("a", "50%off", "orders:1:4");
  start("a", "50xoff");
  EXPECT_EQ(listed("workflow_id=cust-2"), (std::vector<std::string>{"cust-2"}));
  EXPECT_EQ(listed("workflow_id_prefix=cust-"), (std::vector<std::string>{"cust-2", "cust-1"}));
  // The prefix is literal text: % and _ match only themselves.
  EXPECT_EQ(listed("workflow_id_prefix=50%25"), (std::vector<std::string>{"50%off"}));
  EXPECT_EQ(listed("source_ref=orders:0:7"), (std::vector<std::string>{"cust-1"}));
  EXPECT_TRUE(listed("source_ref=orders:0:8").empty());
  EXPECT_EQ(listed("since=2000-01-01T00:00:00Z&workflow=a").size(), 4u);
  EXPECT_TRUE(listed("since=2999-01-01T00:00:00Z").empty());
  EXPECT_TRUE(listed("until=2000-01-01T00:00:00Z").empty());
  EXPECT_EQ(listed("until=2999-01-01T00:00:00%2B01:00").size(), 4u);
  auto bad = get(path("/executions?since=yesterday"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("'since'"), std::string::npos) << bad->body;
  auto long_prefix = get(path("/executions?workflow_id_prefix=" + std::string(2000, 'x')));
  ASSERT_TRUE(long_prefix);
  EXPECT_EQ(long_prefix->status, 400) << long_prefix->body;
  auto cursor = get(path("/executions?cursor=123|not-a-uuid"));
  ASSERT_TRUE(cursor);
  EXPECT_EQ(cursor->status, 400) << cursor->body;

  // Paging newest first over the (created_at, id) cursor: every run once.
  for (int i = 0; i < 7; ++i) start("b", std::nullopt);
  std::set<std::string> seen;
  std::string query = path("/executions?workflow=b&limit=3");
  for (int pages = 0; pages < 10; ++pages) {
    Json j = body(get(query));
    for (const auto& item : j["items"]) seen.insert(item["execution_id"].get<std::string>());
    if (j["next_cursor"].is_null()) break;
    query = path("/executions?workflow=b&limit=3&cursor=") + j["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST_F(ConsoleApiTest, an_execution_shows_its_times_unread_signals_runs_and_trace_link) {
  api::ApiConfig config;
  config.trace_url_template = "https://traces.example/trace/{trace_id}?from=harvest";
  serve(workflows(), {}, config);
  auto trace =
      parse_trace_context("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", std::nullopt);
  ASSERT_TRUE(trace);
  const std::string id = start("a", "entity-1", "orders:2:9", trace);
  for (const char* n : {"first", "second"}) {
    auto s = post(path("/executions/" + id + "/signals/poke"), Json{{"payload", {{"n", n}}}});
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 200) << s->body;
  }
  Json j = body(get(path("/executions/" + id)));
  EXPECT_EQ(j["trace_url"],
            "https://traces.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?from=harvest");
  ASSERT_EQ(j["unread_signals"].size(), 2u) << j.dump();
  EXPECT_EQ(j["unread_signals"][0]["name"], "poke");
  EXPECT_EQ(j["unread_signals"][0]["payload"], Json({{"n", "first"}}));
  EXPECT_EQ(j["unread_signals"][1]["payload"], Json({{"n", "second"}}));
  EXPECT_TRUE(j["unread_signals"][0]["received_at"].is_string());
  EXPECT_EQ(j["runs"], 1);
  EXPECT_TRUE(j["previous_run"].is_null());
  EXPECT_TRUE(j["next_run"].is_null());
  EXPECT_TRUE(j["created_at"].is_string());
  EXPECT_TRUE(j["completed_at"].is_null());
  EXPECT_TRUE(j["lease_owner"].is_null()) << "pending: nobody holds it";
  ASSERT_FALSE(j["history"].empty());
  EXPECT_EQ(j["history"][0]["kind"], "WorkflowStarted");
  EXPECT_EQ(j["history"][0]["recorded_at"], j["created_at"]);

  // No template: no link.
  EXPECT_TRUE(body(get(path("/executions/" + start("b", std::nullopt))))["trace_url"].is_null());
}

TEST_F(ConsoleApiTest, a_trace_template_that_is_not_an_http_url_is_a_config_error) {
  for (const char* bad :
       {"javascript:alert('{trace_id}')", "https://x/no-placeholder", "https://x/{trace_id} <b>"}) {
    auto e = open_engine(workflows());
    ASSERT_TRUE(e);
    api::ApiConfig config;
    config.port = 0;
    config.trace_url_template = bad;
    api::HttpServer server(*e, config);
    auto started = server.start();
    ASSERT_FALSE(started) << bad;
    EXPECT_EQ(started.error().kind, ErrorKind::kConfig);
    EXPECT_NE(started.error().message.find("trace_url_template"), std::string::npos);
  }
}

}  // namespace
}  // namespace harvest::api
