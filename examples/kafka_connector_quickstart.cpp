// Kafka → a durable workflow start: each record on `orders.placed` starts
// exactly one `fulfil_order` run, acked only once the start is durable.
//   KAFKA_BOOTSTRAP=127.0.0.1:9092 HARVEST_DATABASE_URL=postgresql://…
//     HARVEST_INSTANCE_ID=orders-0 kafka_connector_quickstart       # one line
//   curl -s localhost:8080/api/harvest/executions       # the runs, over the HTTP API
// HARVEST_INSTANCE_ID (optional; a pod or host name, unique among the live
// processes) is read by the engine and the Kafka source alike: restarted
// after a crash, the process gets its partitions back at once (static group
// membership) and resumes the runs it had in flight without waiting for
// their leases. Without it, a restart waits out the group's session timeout
// and the runs' leases (docs/design.md, "Restarts and instance ids").
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <harvest/kafka/kafka_source.hpp>
#include <harvest/metrics/prometheus.hpp>
#include <harvest/plugin/plugin.hpp>

using namespace harvest;
using connector::MapResult, connector::MappedMessage, connector::MessageCtx;

struct OrderPlaced {
  std::string order_id;
  long total_cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OrderPlaced, order_id, total_cents)

int main() {
  // Stop signals are blocked before any thread starts (every thread inherits
  // the mask), so the sigwait at the end is their only receiver.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // ---- the user code: a workflow, a source, a binding, the plugin ----
  engine::WorkflowRegistry workflows;
  workflows.add("fulfil_order", [](engine::WorkflowContext&, OrderPlaced order) {
    return "fulfilled " + order.order_id;
  });
  const char* brokers = std::getenv("KAFKA_BOOTSTRAP");
  const char* instance = std::getenv("HARVEST_INSTANCE_ID");  // also the engine's default
  // TLS and SASL settings come from $HARVEST_KAFKA_PROPERTIES_FILE, if set.
  auto source =
      kafka::KafkaSource::connect(kafka::KafkaSourceConfig(brokers ? brokers : "localhost:9092",
                                                           "harvest-orders", "orders.placed")
                                      .instance_id(instance ? instance : ""));
  if (!source) {
    std::fprintf(stderr, "kafka_connector_quickstart: %s\n", source.error().describe().c_str());
    return 1;
  }
  auto binding = connector::SourceBinding::starts("orders", "orders.placed", "fulfil_order")
                     .map_json([](const MessageCtx&, OrderPlaced order) -> MapResult {
                       return MappedMessage{"order-" + order.order_id, order};
                     })
                     .max_in_flight(32);
  auto app = plugin::HarvestPlugin()
                 .workflows(std::move(workflows))
                 .connector(binding, *source)
                 .worker(engine::WorkerConfig{})
                 // Prometheus metrics, served at /api/harvest/metrics.
                 .metrics(std::make_shared<metrics::PrometheusMetrics>())
                 // The HTTP API beside them: 127.0.0.1:${HARVEST_HTTP_PORT:-8080}.
                 .api("/api/harvest", api::api_config_from_env().value())
                 .build();
  // ---- end of user code ----

  app->start();
  // Run until SIGINT/SIGTERM, then stop in order (connectors, then workers).
  int received = 0;
  sigwait(&stop_signals, &received);
  app->stop();
  return 0;
}
