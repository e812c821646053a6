#include "connector_fixture.hpp"

#include <harvest/common/fault.hpp>

namespace harvest::connector::testing {

engine::WorkflowRegistry connector_workflows() {
  engine::WorkflowRegistry r;
  r.add("fulfil_order",
        [](engine::WorkflowContext&, Order o) { return "fulfilled " + o.order_id; });
  r.add(
      "throttled_order", [](engine::WorkflowContext&, Order o) { return o.order_id; },
      engine::WorkflowOptions{
          .throttle = engine::ThrottlePolicy{.starts = 1, .period = std::chrono::hours(1)}});
  r.add("device_session", [](engine::WorkflowContext&, engine::Json) { return 0; });
  r.add("typed_session", [](engine::WorkflowContext&, Device d) { return d.device_id; });
  r.add(
      "debounced_order", [](engine::WorkflowContext&, Order o) { return o.order_id; },
      engine::WorkflowOptions{.debounce = engine::DebouncePolicy{.window = std::chrono::hours(1)}});
  r.add(
      "batched_order", [](engine::WorkflowContext&, engine::Json items) { return items.size(); },
      engine::WorkflowOptions{
          .batch = engine::BatchPolicy{.max_size = 100, .max_wait = std::chrono::hours(1)}});
  return r;
}

SourceBinding order_binding(std::string name, std::string workflow) {
  auto b = SourceBinding::starts(std::move(name), "orders.placed", std::move(workflow));
  b.map_json([](const MessageCtx&, Order o) -> MapResult {
    if (o.order_id.starts_with("reject")) return std::unexpected("no such customer yet");
    if (o.order_id == "bad-input") return MappedMessage{"order-bad", engine::Json("not an order")};
    return MappedMessage{"order-" + o.order_id, o};
  });
  return b;
}

std::string order_json(const std::string& id, long cents) {
  return engine::Json{{"order_id", id}, {"total_cents", cents}}.dump();
}

::testing::AssertionResult run_order_workload(engine::Engine& engine,
                                              std::shared_ptr<metrics::MetricsRecorder> metrics) {
  using namespace std::chrono_literals;
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  source->fixed_lag(3);
  source->push_sqs(order_json("A-1"));
  source->push_sqs(order_json("A-2"));
  source->push_sqs(order_json("reject-1"));
  ConnectorRuntime rt(std::make_shared<const SourceBinding>(order_binding()), source, engine,
                      std::move(metrics), IdempotencyMode::kAuto,
                      ConnectorRuntimeConfig{
                          .poll_timeout = 50ms, .idle_backoff = 10ms, .lag_sample_interval = 10ms});
  auto sink = std::make_shared<RecordingDeadLetterSink>();
  rt.with_dead_letter_sink(sink);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!(sink->letters().size() == 1 && source->pending() == 0)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return ::testing::AssertionFailure()
             << "the order workload did not settle: " << sink->letters().size() << " dead letters, "
             << source->pending() << " pending";
    }
    if (auto pass = rt.run_once(); !pass) {
      return ::testing::AssertionFailure() << "a pass failed: " << pass.error().message;
    }
  }
  if (auto pass = rt.run_once(); !pass) {  // one settled pass: nothing held
    return ::testing::AssertionFailure() << "the settled pass failed: " << pass.error().message;
  }
  return ::testing::AssertionSuccess();
}

void ConnectorTest::SetUp() {
  PgTest::SetUp();
  metrics_ = std::make_shared<metrics::RecordingMetrics>();
  sink_ = std::make_shared<RecordingDeadLetterSink>();
  engine::EngineConfig config;
  config.metrics = metrics_;
  engine_ = open_engine(connector_workflows(), config);
  ASSERT_TRUE(engine_);
}

void ConnectorTest::TearDown() {
  fault::disarm_all();
  engine_.reset();
  PgTest::TearDown();
}

std::unique_ptr<ConnectorRuntime> ConnectorTest::runtime(const SourceBinding& binding,
                                                         std::shared_ptr<EventSource> source,
                                                         ConnectorRuntimeConfig config,
                                                         bool with_sink) {
  auto rt = std::make_unique<ConnectorRuntime>(std::make_shared<const SourceBinding>(binding),
                                               std::move(source), *engine_, metrics_,
                                               IdempotencyMode::kAuto, config);
  if (with_sink) rt->with_dead_letter_sink(sink_);
  return rt;
}

}  // namespace harvest::connector::testing
