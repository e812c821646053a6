// ENG-13: /metrics scraped over HTTP and parsed: the engine's counters move
// as expected and no label value carries an id, a key or a workflow_id.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "api_fixture.hpp"

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the text exposition format 0.0.4 (sample lines only); fails the
// test on a line it cannot read.
std::vector<Sample> parse_exposition(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (i != std::string::npos && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ADD_FAILURE() << "unreadable labels: " << line;
          return out;
        }
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value.push_back(line[j] == 'n' ? '\n' : line[j]);
          } else {
            value.push_back(line[j]);
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    try {
      s.value = std::stod(line.substr(line.find_first_not_of(' ', i)));
    } catch (const std::exception&) {
      ADD_FAILURE() << "unreadable value: " << line;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> find(const std::vector<Sample>& samples, const std::string& name,
                           const std::map<std::string, std::string>& labels) {
  for (const auto& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

class MetricsScrapeTest : public testing::ApiTest {};

TEST_F(MetricsScrapeTest, starts_and_runs_move_the_counters_and_labels_stay_bounded) {
  engine::WorkflowRegistry r;
  r.add("greet", [](WorkflowContext& ctx, Json in) {
    return ctx.step("compose", [&] { return "Hello, " + in.value("name", "?"); });
  });
  serve(std::move(r));
  start_worker();

  const std::string p = std::string(kPrefix) + "/workflows/greet/start";
  std::vector<std::string> ids, keys, workflow_ids;
  const int n = 4;
  for (int i = 0; i < n; ++i) {
    keys.push_back("checkout-" + std::to_string(i));
    workflow_ids.push_back("customer-" + std::to_string(i));
    auto res = post(p, Json{{"workflow_id", workflow_ids.back()},
                            {"input", {{"name", "n"}}},
                            {"idempotency_key", keys.back()}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 201) << res->body;
    ids.push_back(body(res)["execution_id"]);
  }
  auto replay = post(p, Json{{"input", {{"name", "n"}}}, {"idempotency_key", keys[0]}});
  ASSERT_TRUE(replay);
  ASSERT_EQ(replay->status, 200);
  auto rejected = post(p, Json{{"input", {{"name", "n"}}}, {"idempotency_key", "conn:1"}});
  ASSERT_TRUE(rejected);
  ASSERT_EQ(rejected->status, 400);
  for (const auto& id : ids) ASSERT_TRUE(wait_status(id, "completed")) << id;

  auto scrape = get("/metrics");
  ASSERT_TRUE(scrape);
  ASSERT_EQ(scrape->status, 200);
  EXPECT_EQ(scrape->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u)
      << scrape->get_header_value("Content-Type");
  const std::string& text = scrape->body;
  EXPECT_NE(text.find("# TYPE harvest_engine_starts_total counter"), std::string::npos) << text;
  auto samples = parse_exposition(text);

  EXPECT_EQ(
      find(samples, "harvest_engine_starts_total", {{"workflow", "greet"}, {"outcome", "started"}}),
      n)
      << text;
  EXPECT_EQ(find(samples, "harvest_engine_starts_total",
                 {{"workflow", "greet"}, {"outcome", "idempotent_replay"}}),
            1)
      << text;
  EXPECT_EQ(find(samples, "harvest_engine_runs_completed_total", {{"workflow", "greet"}}), n)
      << text;
  EXPECT_EQ(find(samples, "harvest_api_requests_total", {{"route", "start"}, {"status", "201"}}), n)
      << text;
  EXPECT_EQ(find(samples, "harvest_api_requests_total", {{"route", "start"}, {"status", "400"}}), 1)
      << text;
  // Run durations: one observation per completed attempt.
  EXPECT_NE(text.find("# TYPE harvest_engine_run_seconds histogram"), std::string::npos) << text;
  EXPECT_EQ(find(samples, "harvest_engine_run_seconds_count", {{"workflow", "greet"}}), n) << text;
  EXPECT_NE(text.find("# TYPE harvest_engine_queue_depth gauge"), std::string::npos) << text;

  // Bounded labels: no execution id (or anything uuid-shaped), no key, no
  // workflow_id anywhere in the exposition.
  const std::regex uuid(
      "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  for (const auto& s : samples) {
    for (const auto& [k, v] : s.labels) {
      EXPECT_FALSE(std::regex_search(v, uuid)) << s.name << " " << k << "=" << v;
      for (const auto& bad : keys) EXPECT_EQ(v.find(bad), std::string::npos) << s.name;
      for (const auto& bad : workflow_ids) EXPECT_EQ(v.find(bad), std::string::npos) << s.name;
      EXPECT_EQ(v.find("conn:"), std::string::npos) << s.name;
    }
  }
  for (const auto& id : ids)
    EXPECT_EQ(text.find(id), std::string::npos) << "execution id in /metrics";
}

}  // namespace
}  // namespace harvest::api
