// Trace context: the producer's W3C trace context travels from the message's
// headers (Kafka) or attributes (SQS) into the start's provenance, the
// execution view, the WorkflowStarted event and the run's log lines.
#include <gtest/gtest.h>

#include "connector_fixture.hpp"
#include <harvest/common/log.hpp>
#include <harvest/engine/worker.hpp>

namespace harvest::connector::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST_F(ConnectorTest, a_traceparent_header_is_kept_with_the_start_and_shown_by_the_view) {
  auto source = std::make_shared<MockSource>("orders.placed");
  auto rt = runtime(order_binding(), source);
  source->push_kafka(0, 0, order_json("T-1"), std::nullopt,
                     {{"TraceParent", kParent}, {"tracestate", "rojo=00f067aa0ba902b7"}});
  source->push_kafka(0, 1, order_json("T-2"), std::nullopt, {{"traceparent", "garbage"}});
  source->push_kafka(0, 2, order_json("T-3"));
  auto pass = rt->run_once();
  ASSERT_TRUE(pass);
  EXPECT_EQ(pass->acked, 3u) << "a malformed traceparent never holds a message back";
  EXPECT_EQ(executions(), 3);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE start_trace IS NULL"),
            2);
  const std::string id =
      text("SELECT id::text FROM harvest_workflow_executions WHERE start_trace IS NOT NULL");
  auto view = engine_->get_execution(id);
  ASSERT_TRUE(view);
  ASSERT_TRUE(view->start_trace);
  EXPECT_EQ(view->start_trace->traceparent, kParent);
  EXPECT_EQ(view->start_trace->tracestate, "rojo=00f067aa0ba902b7");
  EXPECT_EQ(view->input["order_id"], "T-1");
  ASSERT_FALSE(view->history.empty());
  EXPECT_EQ(view->history.front().kind, "WorkflowStarted");
  EXPECT_EQ(view->history.front().payload["trace"]["traceparent"], kParent);
}

TEST_F(ConnectorTest, an_sqs_traceparent_attribute_reaches_the_run_and_its_log_lines) {
  auto source = std::make_shared<MockSource>("orders.placed", MockSource::Kind::kRedelivering);
  auto rt = runtime(order_binding(), source);
  source->push_sqs(order_json("S-1"), {{"traceparent", kParent}});
  ASSERT_TRUE(rt->run_once());
  ASSERT_EQ(executions(), 1);
  EXPECT_EQ(text("SELECT start_trace->>'traceparent' FROM harvest_workflow_executions"), kParent);

  // The worker names the trace on every line it logs while the run executes.
  engine::WorkflowRegistry r;
  r.add("fulfil_order", [](engine::WorkflowContext&, Order o) {
    log::info("fulfilling {}", o.order_id);
    return o.order_id;
  });
  auto engine = open_engine(std::move(r));
  log::LogCapture capture(spdlog::level::info);
  engine::Worker worker(*engine, {.concurrency = 1, .poll_interval = 10ms});
  worker.start();
  ASSERT_TRUE(eventually([&] {
    return scalar(
               "SELECT count(*) FROM harvest_workflow_executions WHERE status = "
               "'completed'") == 1;
  }));
  worker.stop();
  EXPECT_TRUE(capture.contains({"fulfilling S-1", "trace_id=4bf92f3577b34da6a3ce929d0e0e4736"}));
  log::info("after the run");
  EXPECT_FALSE(capture.contains({"after the run", "trace_id="})) << "the fields end with the run";
}

}  // namespace
}  // namespace harvest::connector::testing
