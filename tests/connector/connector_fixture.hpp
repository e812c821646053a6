// Shared setup for connector tests: an engine over the test database with
// the workflows the connector tests target, and helpers to build runtimes.
#pragma once

#include <memory>

#include "support/pg_fixture.hpp"
#include <harvest/connector/binding.hpp>
#include <harvest/connector/mock_source.hpp>
#include <harvest/connector/runtime.hpp>

namespace harvest::connector::testing {

struct Order {
  std::string order_id;
  long total_cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Order, order_id, total_cents)

// fulfil_order(Order), throttled_order(Order, 1 start per hour),
// device_session(any JSON; the entity target).
// A typed entity input: a device's session needs its device id.
struct Device {
  std::string device_id;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Device, device_id)

engine::WorkflowRegistry connector_workflows();

// starts("orders", "orders.placed", "fulfil_order") mapping an Order to
// workflow_id "order-<id>"; an order_id starting with "reject" is a mapping
// rejection; "bad-input" maps to a payload fulfil_order does not accept.
SourceBinding order_binding(std::string name = "orders", std::string workflow = "fulfil_order");

std::string order_json(const std::string& id, long cents = 100);

// The workload tests read back from what a runtime exports: over a
// redelivering MockSource reporting lag 3, orders are dispatched
// and reject-1 is retried until its third strike dead-letters it; then one
// settled pass. Fails when it does not settle.
::testing::AssertionResult run_order_workload(engine::Engine& engine,
                                              std::shared_ptr<metrics::MetricsRecorder> metrics);

class ConnectorTest : public harvest::testing::PgTest {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::unique_ptr<ConnectorRuntime> runtime(const SourceBinding& binding,
                                            std::shared_ptr<EventSource> source,
                                            ConnectorRuntimeConfig config = {},
                                            bool with_sink = true);
  long long executions() { return scalar("SELECT count(*) FROM harvest_workflow_executions"); }

  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<metrics::RecordingMetrics> metrics_;
  std::shared_ptr<RecordingDeadLetterSink> sink_;
};

}  // namespace harvest::connector::testing
