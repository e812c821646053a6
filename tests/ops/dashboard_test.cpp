// The operations surface: deploy/grafana/harvest.json and
// deploy/prometheus/alerts.yml query only what harvest exports. A real
// workload (the connector runtime over MockSource with a poison record, an
// engine worker, a run that fails for good, API requests) fills a
// PrometheusMetrics; /metrics is scraped over HTTP and every metric name
// and label every PromQL expression of the dashboard and the alert rules
// uses must be in that exposition.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "api_fixture.hpp"
#include "block_yaml.hpp"
#include "connector_fixture.hpp"
#include "promql_refs.hpp"
#include <harvest/api/routes.hpp>
#include <harvest/connector/runtime.hpp>

namespace harvest::ops {
namespace {

using namespace std::chrono_literals;
using connector::testing::order_json;
using nlohmann::json;
using Set = std::set<std::string>;

// Labels Prometheus attaches to every scraped series, and the series it
// writes itself for each scrape: neither is in harvest's own exposition.
const Set kTargetLabels = {"job", "instance"};
const std::map<std::string, Set> kScrapeSeries = {{"up", {}}};

std::string source_path(const std::string& relative) {
  return std::string(HARVEST_SOURCE_DIR) + "/" + relative;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return json::parse(in);  // throws on malformed JSON
}

// Sample name → every label name it carries, from text format 0.0.4.
std::map<std::string, Set> exposition_labels(const std::string& text) {
  std::map<std::string, Set> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t brace = line.find_first_of("{ ");
    Set& labels = out[line.substr(0, brace)];
    if (brace == std::string::npos || line[brace] != '{') continue;
    // name="value" pairs; values may hold escaped quotes.
    for (size_t i = brace + 1; i < line.size() && line[i] != '}';) {
      size_t eq = line.find('=', i);
      labels.insert(line.substr(i, eq - i));
      size_t j = eq + 2;
      while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  return out;
}

// {{label}} in a Grafana legend, {{ $labels.label }} in an alert template.
Set template_labels(const std::string& text, const std::regex& pattern) {
  Set out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

struct Query {
  std::string where;  // "panel 'Lag owed by source' A", "alert HarvestX"
  std::string expr;
  Set templated;  // labels a legend or annotation substitutes
};

std::vector<Query> dashboard_queries(const json& dash) {
  static const std::regex kLegend(R"(\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\})");
  std::vector<Query> out;
  std::function<void(const json&)> walk = [&](const json& panels) {
    for (const auto& p : panels) {
      if (p.contains("panels")) walk(p.at("panels"));
      if (!p.contains("targets")) continue;
      for (const auto& t : p.at("targets")) {
        out.push_back(Query{
            "panel '" + p.at("title").get<std::string>() + "' " + t.at("refId").get<std::string>(),
            t.at("expr").get<std::string>(),
            template_labels(t.value("legendFormat", ""), kLegend)});
      }
    }
  };
  walk(dash.at("panels"));
  return out;
}

std::vector<Query> alert_queries(const json& rules_file) {
  static const std::regex kLabelRef(R"(\$labels\.([A-Za-z_][A-Za-z0-9_]*))");
  std::vector<Query> out;
  for (const auto& group : rules_file.at("groups")) {
    for (const auto& rule : group.at("rules")) {
      Set templated;
      const json annotations = rule.value("annotations", json::object());
      for (const auto& [k, v] : annotations.items()) {
        auto more = template_labels(v.get<std::string>(), kLabelRef);
        templated.insert(more.begin(), more.end());
      }
      out.push_back(Query{"alert " + rule.at("alert").get<std::string>(),
                          rule.at("expr").get<std::string>(), templated});
    }
  }
  return out;
}

class DashboardTest : public harvest::testing::ApiTest {
 protected:
  // Runs the workload and scrapes /metrics once every series exists.
  void SetUp() override {
    ApiTest::SetUp();
    auto workflows = connector::testing::connector_workflows();
    workflows.add(
        "doomed",
        [](engine::WorkflowContext&, engine::Json) -> int {
          throw std::runtime_error("doomed fails");
        },
        engine::WorkflowOptions{.max_attempts = 1});
    serve(std::move(workflows));
    start_worker();

    // Broker intake: two good orders, and one the mapper rejects: retried
    // (reason mapping_rejected) until the third strike dead-letters it.
    ASSERT_TRUE(connector::testing::run_order_workload(*engine_, metrics_))
        << "the poison order is dead-lettered";

    // The API: a run that fails for good, a health check, an unknown route.
    auto started = post("/api/harvest/workflows/doomed/start", R"({"input": {}})");
    ASSERT_TRUE(started);
    ASSERT_EQ(started->status, 201) << started->body;
    ASSERT_EQ(get("/healthz")->status, 200);
    ASSERT_EQ(get("/api/harvest/nowhere")->status, 404);
    ASSERT_TRUE(engine_->queue_depth());

    ASSERT_TRUE(eventually([&] {
      auto scrape = get("/metrics");
      if (!scrape || scrape->status != 200) return false;
      exposition_ = scrape->body;
      series_ = exposition_labels(exposition_);
      return series_.contains("harvest_engine_runs_failed_total") &&
             series_.contains("harvest_engine_runs_completed_total");
    })) << exposition_;
  }

  // Every metric and label `q` uses is exported (or is a scrape series /
  // target label); a label a legend or annotation substitutes survives the
  // expression's aggregation.
  void check(const Query& q) {
    SCOPED_TRACE(q.where + ": " + q.expr);
    harvest::testing::PromqlRefs refs;
    try {
      refs = harvest::testing::promql_refs(q.expr);
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    ASSERT_FALSE(refs.metrics.empty()) << "no metric in the expression";
    Set available;  // labels the expression's result may carry
    for (const auto& [metric, matched] : refs.metrics) {
      Set labels;
      if (auto s = series_.find(metric); s != series_.end()) {
        labels = s->second;
      } else if (auto p = kScrapeSeries.find(metric); p != kScrapeSeries.end()) {
        labels = p->second;
      } else {
        ADD_FAILURE() << "metric " << metric << " is not in the exposition";
        continue;
      }
      labels.insert(kTargetLabels.begin(), kTargetLabels.end());
      for (const auto& l : matched) {
        EXPECT_TRUE(labels.contains(l)) << "metric " << metric << " has no label '" << l << "'";
      }
      for (const auto& l : refs.grouping) {
        EXPECT_TRUE(labels.contains(l)) << "grouping label '" << l << "' is not on " << metric;
      }
      available.insert(labels.begin(), labels.end());
    }
    if (refs.aggregates) available = refs.grouping;
    for (const auto& l : q.templated) {
      EXPECT_TRUE(available.contains(l))
          << "the template uses label '" << l << "', which the expression's result lacks";
    }
  }

  std::string exposition_;
  std::map<std::string, Set> series_;
};

TEST_F(DashboardTest, the_workload_exports_every_series_the_deploy_files_are_about) {
  for (const auto* name :
       {"harvest_connector_dispatched_total", "harvest_connector_dead_lettered_total",
        "harvest_connector_retried_total", "harvest_connector_lag",
        "harvest_connector_dispatch_seconds_bucket", "harvest_engine_starts_total",
        "harvest_engine_runs_completed_total", "harvest_engine_runs_failed_total",
        "harvest_engine_run_seconds_bucket", "harvest_engine_queue_depth",
        "harvest_api_requests_total", "harvest_connector_recoveries_total",
        "harvest_connector_store_unavailable", "harvest_connector_in_flight",
        "harvest_connector_last_pass_timestamp_seconds"}) {
    EXPECT_TRUE(series_.contains(name)) << name << " missing from:\n" << exposition_;
  }
  EXPECT_EQ(series_["harvest_connector_lag"], Set{"source"});
  for (const auto* gauge :
       {"harvest_connector_recoveries_total", "harvest_connector_store_unavailable",
        "harvest_connector_in_flight", "harvest_connector_last_pass_timestamp_seconds"}) {
    EXPECT_EQ(series_[gauge], Set{"source"}) << gauge;
  }
  EXPECT_EQ(series_["harvest_connector_retried_total"], (Set{"source", "reason"}));
  EXPECT_EQ(series_["harvest_connector_dispatch_seconds_bucket"], (Set{"source", "le"}));
  EXPECT_EQ(series_["harvest_api_requests_total"], (Set{"route", "status"}));
}

TEST_F(DashboardTest, every_dashboard_query_uses_only_exported_metrics_and_labels) {
  json dash;
  ASSERT_NO_THROW(dash = read_json(source_path("deploy/grafana/harvest.json")));
  EXPECT_EQ(dash.at("uid"), "harvest-overview");
  auto queries = dashboard_queries(dash);
  ASSERT_GE(queries.size(), 10u);
  for (const auto& q : queries) check(q);

  // The template variable's label_values(metric, label).
  static const std::regex kLabelValues(R"(^label_values\(\s*(\w+)\s*,\s*(\w+)\s*\)$)");
  for (const auto& var : dash.at("templating").at("list")) {
    if (var.at("type") != "query") continue;
    const json& query = var.at("query");
    const std::string text =
        query.is_string() ? query.get<std::string>() : query.at("query").get<std::string>();
    std::smatch m;
    ASSERT_TRUE(std::regex_match(text, m, kLabelValues)) << text;
    ASSERT_TRUE(series_.contains(m[1])) << text;
    EXPECT_TRUE(series_[m[1]].contains(m[2])) << text;
  }
}

TEST_F(DashboardTest, lag_is_the_max_across_replicas_never_the_sum) {
  auto dash = read_json(source_path("deploy/grafana/harvest.json"));
  auto alerts =
      harvest::testing::BlockYaml::parse_file(source_path("deploy/prometheus/alerts.yml"));
  auto queries = dashboard_queries(dash);
  auto more = alert_queries(alerts);
  queries.insert(queries.end(), more.begin(), more.end());
  int lag_queries = 0;
  static const std::regex kLagSelector(R"(\bharvest_connector_lag\b)");
  static const std::regex kMaxLag(R"(max by \(source\) \(harvest_connector_lag[\s{)])");
  for (const auto& q : queries) {
    if (!std::regex_search(q.expr, kLagSelector)) continue;
    ++lag_queries;
    EXPECT_EQ(q.expr.find("sum"), std::string::npos) << q.where << ": " << q.expr;
    EXPECT_TRUE(std::regex_search(q.expr, kMaxLag)) << q.where << ": " << q.expr;
  }
  EXPECT_GE(lag_queries, 2) << "the lag panel and the lag alert";
}

TEST_F(DashboardTest, every_alert_rule_is_well_formed_and_uses_only_exported_metrics_and_labels) {
  json rules;
  ASSERT_NO_THROW(
      rules = harvest::testing::BlockYaml::parse_file(source_path("deploy/prometheus/alerts.yml")));
  Set names;
  static const std::regex kDuration(R"(^([0-9]+(ms|s|m|h|d|w|y))+$)");
  ASSERT_TRUE(rules.at("groups").is_array());
  for (const auto& group : rules.at("groups")) {
    ASSERT_TRUE(group.at("name").is_string());
    for (const auto& rule : group.at("rules")) {
      const std::string name = rule.at("alert").get<std::string>();
      EXPECT_TRUE(names.insert(name).second) << "alert " << name << " defined twice";
      static const Set kKeys = {"alert", "expr", "for", "labels", "annotations"};
      for (const auto& [k, v] : rule.items()) EXPECT_TRUE(kKeys.contains(k)) << name << ": " << k;
      EXPECT_TRUE(rule.at("expr").is_string()) << name;
      if (rule.contains("for")) {
        EXPECT_TRUE(std::regex_match(rule.at("for").get<std::string>(), kDuration)) << name;
      }
      const std::string severity = rule.at("labels").at("severity").get<std::string>();
      EXPECT_TRUE(severity == "warning" || severity == "critical") << name;
      EXPECT_TRUE(rule.at("annotations").contains("summary")) << name;
    }
  }
  // The alerts operators need: lag, dead letters, stalls, store/health, API 5xx.
  for (const auto* expected : {"HarvestConnectorLagNotFalling", "HarvestConnectorDeadLettersRising",
                               "HarvestConnectorStalled", "HarvestStoreUnavailable",
                               "HarvestHealthFailing", "HarvestApiErrors"}) {
    EXPECT_TRUE(names.contains(expected)) << expected;
  }
  for (const auto& q : alert_queries(rules)) check(q);
  // Every route an alert's text points the operator to exists, with the query
  // parameter it names (a renamed route must not leave the alert pointing
  // nowhere). The connector dead-letter alert names its own route.
  static const std::regex kRoute(R"(GET (/api/harvest/[a-z/-]+)(\?([a-z_]+)=)?)");
  const auto specs = api::route_specs("/api/harvest");
  size_t routes_named = 0;
  for (const auto& group : rules.at("groups")) {
    for (const auto& rule : group.at("rules")) {
      const std::string text = rule.at("annotations").dump();
      for (auto it = std::sregex_iterator(text.begin(), text.end(), kRoute);
           it != std::sregex_iterator(); ++it) {
        ++routes_named;
        const std::string path = (*it)[1];
        const auto spec = std::ranges::find_if(specs, [&](const api::RouteSpec& r) {
          return r.method == api::Method::kGet && r.path == path;
        });
        ASSERT_NE(spec, specs.end()) << rule.at("alert") << " names GET " << path;
        if ((*it)[3].matched) {
          EXPECT_TRUE(std::ranges::find(spec->query_params, std::string_view((*it)[3].str())) !=
                      spec->query_params.end())
              << rule.at("alert") << " names query parameter " << (*it)[3];
        }
      }
    }
  }
  EXPECT_GE(routes_named, 1u);
  for (const auto& group : rules.at("groups")) {
    for (const auto& rule : group.at("rules")) {
      if (rule.at("alert") == "HarvestConnectorDeadLettersRising") {
        EXPECT_NE(rule.at("annotations")
                      .at("description")
                      .get<std::string>()
                      .find("/connector-dead-letters"),
                  std::string::npos);
      }
    }
  }
}

}  // namespace
}  // namespace harvest::ops
