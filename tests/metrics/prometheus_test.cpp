// ENG-13: the Prometheus exporter behind MetricsRecorder.
#include <gtest/gtest.h>

#include <thread>

#include <harvest/metrics/prometheus.hpp>

namespace harvest::metrics {
namespace {

using Kind = PrometheusMetrics::Kind;

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(PrometheusMetrics, names_map_dots_to_underscores_and_counters_get_total) {
  EXPECT_EQ(PrometheusMetrics::exposition_name("harvest.engine.starts", Kind::kCounter),
            "harvest_engine_starts_total");
  EXPECT_EQ(PrometheusMetrics::exposition_name("x.requests_total", Kind::kCounter),
            "x_requests_total");
  EXPECT_EQ(PrometheusMetrics::exposition_name("harvest.connector.lag", Kind::kGauge),
            "harvest_connector_lag");
  EXPECT_EQ(PrometheusMetrics::exposition_name("harvest.engine.run_seconds", Kind::kHistogram),
            "harvest_engine_run_seconds");
  EXPECT_EQ(PrometheusMetrics::exposition_name("9-lives", Kind::kGauge), "_9_lives");
  EXPECT_EQ(PrometheusMetrics::label_name("binding-name"), "binding_name");
  EXPECT_EQ(PrometheusMetrics::label_name("__reserved"), "_reserved");
}

TEST(PrometheusMetrics, renders_counters_gauges_and_histograms_in_text_format) {
  PrometheusMetrics m;
  for (int i = 0; i < 3; ++i) {
    m.increment(kEngineStarts, {{"workflow", "greet"}, {"outcome", "started"}});
  }
  m.increment(kEngineStarts, {{"workflow", "greet"}, {"outcome", "idempotent_replay"}}, 2);
  m.set_gauge(kConnectorLag, {{"source", "orders"}}, 42);
  m.observe(kEngineRunSeconds, {{"workflow", "greet"}}, 0.2);
  m.observe(kEngineRunSeconds, {{"workflow", "greet"}}, 7200);
  m.observe(kConnectorDispatchSeconds, {{"source", "orders"}}, 0.0007);

  std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# TYPE harvest_engine_starts_total counter")) << text;
  EXPECT_TRUE(
      has_line(text, R"(harvest_engine_starts_total{outcome="started",workflow="greet"} 3)"))
      << text;
  EXPECT_TRUE(has_line(
      text, R"(harvest_engine_starts_total{outcome="idempotent_replay",workflow="greet"} 2)"))
      << text;
  EXPECT_TRUE(has_line(text, "# TYPE harvest_connector_lag gauge")) << text;
  EXPECT_TRUE(has_line(text, R"(harvest_connector_lag{source="orders"} 42)")) << text;
  // Run durations: buckets reach a day, so a two-hour run is not just "+Inf".
  EXPECT_TRUE(has_line(text, "# TYPE harvest_engine_run_seconds histogram")) << text;
  EXPECT_TRUE(has_line(text, R"(harvest_engine_run_seconds_count{workflow="greet"} 2)")) << text;
  EXPECT_TRUE(has_line(text, R"(harvest_engine_run_seconds_bucket{workflow="greet",le="0.25"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(harvest_engine_run_seconds_bucket{workflow="greet",le="3600"} 1)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(harvest_engine_run_seconds_bucket{workflow="greet",le="21600"} 2)"))
      << text;
  // Dispatch latency: sub-millisecond resolution.
  EXPECT_TRUE(
      has_line(text, R"(harvest_connector_dispatch_seconds_bucket{source="orders",le="0.0005"} 0)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(harvest_connector_dispatch_seconds_bucket{source="orders",le="0.001"} 1)"))
      << text;
}

TEST(PrometheusMetrics, colliding_kinds_and_odd_label_names_never_throw) {
  PrometheusMetrics m;
  m.set_gauge("harvest.thing", {}, 1);
  EXPECT_NO_THROW(m.observe("harvest.thing", {}, 1));  // same Prometheus name, other type
  EXPECT_NO_THROW(m.increment("harvest.odd", {{"bad-label", "v"}, {"le", "x"}}));
  m.increment("harvest.odd", {{"ok", "v"}});
  std::string text = m.render();
  EXPECT_TRUE(has_line(text, "harvest_thing 1")) << text;
  EXPECT_TRUE(has_line(text, R"(harvest_odd_total{bad_label="v",le="x"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(harvest_odd_total{ok="v"} 1)")) << text;
}

TEST(PrometheusMetrics, label_values_are_escaped) {
  PrometheusMetrics m;
  m.increment("harvest.x", {{"reason", "say \"hi\"\nnow\\"}});
  EXPECT_TRUE(has_line(m.render(), R"(harvest_x_total{reason="say \"hi\"\nnow\\"} 1)"))
      << m.render();
}

TEST(PrometheusMetrics, concurrent_recording_loses_nothing) {
  PrometheusMetrics m;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 1000; ++i) {
          m.increment(kEngineStarts, {{"workflow", "w"}, {"outcome", "started"}});
          m.observe(kEngineRunSeconds, {{"workflow", "w" + std::to_string(t % 2)}}, 0.01);
          if (i % 100 == 0) (void)m.render();
        }
      });
    }
  }
  std::string text = m.render();
  EXPECT_TRUE(has_line(text, R"(harvest_engine_starts_total{outcome="started",workflow="w"} 4000)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(harvest_engine_run_seconds_count{workflow="w0"} 2000)")) << text;
}

}  // namespace
}  // namespace harvest::metrics
