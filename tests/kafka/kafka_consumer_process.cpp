// A consumer process for the crash tests (kafka_crash_test.cpp): the plugin
// with one KafkaSource binding (`orders`: each order starts fulfil_order as a
// run named `order-<id>#<pid>-<n>`, fresh for every mapping attempt, so only
// the broker-coordinate dedupe key can resolve a redelivery to an existing
// execution), run until it has settled enough records, then stopped in order
// (the final prefix is committed on leaving the group).
// Crash tests arm `HARVEST_FAULT_POINTS=connector.after_dispatch_before_ack=kill`
// in its environment, so it dies by SIGKILL after its first dispatch commits.
//
//   kafka_consumer_process --db URL --bootstrap HOST:PORT --topic T --group G
//       [--reset earliest|latest] [--eof] [--max-batch N]
//       [--settle N] [--executions N] [--completed N] [--timeout-ms MS]
//       [--instance-id ID] [--session-timeout-ms MS]
//       [--worker] [--hold] [--lease-ms MS]
//
// --instance-id is the stable instance id (engine and Kafka static
// membership); --worker runs the worker pool with --lease-ms leases; --hold
// makes every run block forever (runs stay in flight until the process is
// killed). It stops once this process has settled (dispatched or recognised
// as an idempotent replay) at least --settle records and the database holds
// at least --executions executions, --completed of them completed. Prints one line to stdout,
// `settled dispatched=<n> idempotent_replay=<n>`, and exits 0; exits 2 when
// --timeout-ms passes first (still printing the line), 1 on bad usage.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <harvest/kafka/kafka_source.hpp>
#include <harvest/metrics/recorder.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;

namespace {

struct OrderPlaced {
  std::string order_id;
  long total_cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(OrderPlaced, order_id, total_cents)

long long execution_count(store::Connection& db, const char* where = "true") {
  auto r = db.exec(fmt::format("SELECT count(*) FROM harvest_workflow_executions WHERE {}", where));
  return r && !r->empty() ? std::stoll(r->get(0, 0)) : -1;
}

int run(std::map<std::string, std::string> args) {
  const auto arg = [&](const std::string& name, const std::string& fallback = "") {
    auto it = args.find(name);
    return it == args.end() ? fallback : it->second;
  };
  for (const char* required : {"--db", "--bootstrap", "--topic", "--group"}) {
    if (arg(required).empty()) {
      fmt::print(stderr, "kafka_consumer_process: {} is required\n", required);
      return 1;
    }
  }
  const long long settle = std::stoll(arg("--settle", "0"));
  const long long executions = std::stoll(arg("--executions", "0"));
  const long long completed = std::stoll(arg("--completed", "0"));
  const bool hold = args.contains("--hold");
  const auto timeout = std::chrono::milliseconds(std::stoll(arg("--timeout-ms", "60000")));

  auto config = kafka::KafkaSourceConfig(arg("--bootstrap"), arg("--group"), arg("--topic"))
                    .property("auto.offset.reset", arg("--reset", "earliest"))
                    .property("heartbeat.interval.ms", "250")
                    .property("session.timeout.ms", arg("--session-timeout-ms", "6000"))
                    .instance_id(arg("--instance-id"));
  if (args.contains("--eof")) config.property("enable.partition.eof", "true");
  auto source = kafka::KafkaSource::connect(config);
  if (!source) {
    fmt::print(stderr, "kafka_consumer_process: {}\n", source.error().message);
    return 1;
  }

  engine::WorkflowRegistry workflows;
  workflows.add("fulfil_order", [hold](engine::WorkflowContext&, OrderPlaced o) {
    // --hold: the run stays in flight (claimed, leased, renewed) until the
    // process is killed.
    while (hold) std::this_thread::sleep_for(std::chrono::seconds(1));
    return "fulfilled " + o.order_id;
  });
  auto binding = connector::SourceBinding::starts("orders", arg("--topic"), "fulfil_order");
  binding.map_json([](const connector::MessageCtx&, OrderPlaced o) -> connector::MapResult {
    static std::atomic<uint64_t> attempt{0};
    return connector::MappedMessage{
        fmt::format("order-{}#{}-{}", o.order_id, ::getpid(), ++attempt), o};
  });
  connector::ConnectorRuntimeConfig runtime_config;
  runtime_config.poll_timeout = std::chrono::milliseconds(200);
  runtime_config.idle_backoff = std::chrono::milliseconds(20);
  runtime_config.max_batch = std::stoul(arg("--max-batch", "64"));

  engine::EngineConfig engine_config;
  engine_config.database_url = arg("--db");
  engine_config.profile = engine::Profile::kTest;
  engine_config.instance_id = arg("--instance-id");
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  plugin::HarvestPlugin plugin;
  plugin.engine_config(engine_config)
      .workflows(std::move(workflows))
      .connector_with_config(binding, *source, runtime_config)
      .start_idempotency_window(std::chrono::hours(24 * 7))
      .metrics(metrics);
  if (args.contains("--worker")) {
    engine::WorkerConfig worker;
    worker.lease = std::chrono::milliseconds(std::stoll(arg("--lease-ms", "30000")));
    plugin.worker(worker);
  }
  auto app = plugin.build();
  auto db = store::Connection::open(arg("--db"));
  if (!db) {
    fmt::print(stderr, "kafka_consumer_process: {}\n", db.error().message);
    return 1;
  }

  const auto outcome = [&](const char* o) {
    return static_cast<long long>(
        metrics->counter(metrics::kConnectorDispatched, {{"source", "orders"}, {"outcome", o}}));
  };
  app->start();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    done = outcome("dispatched") + outcome("idempotent_replay") >= settle &&
           execution_count(**db) >= executions &&
           execution_count(**db, "status = 'completed'") >= completed;
    // Polling interval for state owned by other threads; nothing relies on it.
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Connectors first (the current pass finishes and acks), then the source
  // leaves the group, committing the acked prefix synchronously.
  app->stop();
  app.reset();
  source->reset();
  fmt::print("settled dispatched={} idempotent_replay={}\n", outcome("dispatched"),
             outcome("idempotent_replay"));
  std::fflush(stdout);
  return done ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (name == "--eof" || name == "--worker" || name == "--hold") {
      args[name] = "1";
    } else if (i + 1 < argc) {
      args[name] = argv[++i];
    }
  }
  try {
    return run(std::move(args));
  } catch (const std::exception& e) {
    fmt::print(stderr, "kafka_consumer_process: {}\n", e.what());
    return 1;
  }
}
