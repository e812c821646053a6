// SQS → an entity workflow (start-or-signal): the broker-connectors chapter's
// SQS example, runnable against the local SQS-compatible server.
//
//   eval "$(scripts/services/sqs.sh start)"   # ElasticMQ on 127.0.0.1:19324
//   sqs_connector_quickstart demo             # send readings + one poison message, consume, report
//   sqs_connector_quickstart run              # consume until Ctrl-C
//   sqs_connector_quickstart send [n [id]]    # send n readings (default 9) from another terminal,
//                                             # for devices boiler-<id>, pump-<id>, fan-<id>
//
// Every reading for one device lands in that device's `device_session` run:
// the first starts it, later ones are `reading` signals to it. A message that
// cannot be decoded is handed back to SQS, whose redrive policy moves it to
// device-telemetry-dlq after maxReceiveCount receives (broker-native
// dead-lettering; no harvest_connector_dead_letters row).
//
// Environment (all optional): AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL (default
// http://127.0.0.1:19324, the local server), HARVEST_SQS_QUEUE_URL (use this
// queue instead of creating device-telemetry), AWS_REGION and the usual AWS
// credentials (dummies are filled in for a local endpoint only),
// HARVEST_DATABASE_URL (default: a private dev cluster under ./.harvest).
#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include <harvest/engine/worker.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/sqs/sqs_client.hpp>
#include <harvest/sqs/sqs_source.hpp>

using namespace harvest;
using namespace harvest::connector;
using namespace std::chrono_literals;

namespace {

// ---- The code you write: a workflow, a binding, a source, the plugin. ----

struct Reading {
  std::string device_id;
  double celsius = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Reading, device_id, celsius)

// A session ends once its device has been quiet this long.
constexpr auto kSessionIdle = 3s;

engine::WorkflowRegistry workflows() {
  engine::WorkflowRegistry r;
  r.add("device_session", [](engine::WorkflowContext& ctx, engine::Json) {
    int readings = 0;
    double sum = 0, max = -273.15;
    while (auto signal = ctx.wait_signal("reading", kSessionIdle)) {
      auto reading = signal->get<Reading>();
      ++readings;
      sum += reading.celsius;
      max = std::max(max, reading.celsius);
    }
    return engine::Json{{"readings", readings},
                        {"mean_celsius", readings ? std::round(sum / readings * 10) / 10 : 0.0},
                        {"max_celsius", max}};
  });
  return r;
}

std::unique_ptr<plugin::HarvestApp> build_app(const std::string& queue_url) {
  auto binding = SourceBinding::signals_with_start("telemetry", "device-telemetry",
                                                   "device_session", "reading");
  binding
      .map_json([](const MessageCtx&, Reading r) -> MapResult {
        return MappedMessage{"device-" + r.device_id, r};
      })
      .broker_native_dead_letter()  // let SQS redrive own poison messages
      .max_in_flight(16);

  auto source = sqs::SqsSource::connect(
      sqs::SqsSourceConfig(queue_url).stream("device-telemetry").visibility_timeout_secs(60));
  if (!source) throw ConfigError("sqs client should build: " + source.error().message);

  return plugin::HarvestPlugin()
      .workflows(workflows())
      .engine_config(
          {.profile = engine::Profile::kDev})  // $HARVEST_DATABASE_URL, else a private cluster
      .connector(binding, *source)
      .worker({})
      .build();
}

// ---- Demo scaffolding: local defaults, queues, sample messages, output. ----

constexpr const char* kLocalEndpoint = "http://127.0.0.1:19324";  // scripts/services/sqs.sh
constexpr const char* kQueue = "device-telemetry";
constexpr int kMaxReceiveCount = 5;

bool is_local(const std::string& url) {
  return url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost");
}

// Points the ambient AWS configuration at the local server unless it is set.
// ElasticMQ accepts any signature, so a local endpoint gets dummy credentials
// and a region when none are configured; a real endpoint never does.
void default_to_local_server() {
  if (!std::getenv("AWS_ENDPOINT_URL_SQS") && !std::getenv("AWS_ENDPOINT_URL") &&
      !std::getenv("HARVEST_SQS_QUEUE_URL")) {
    ::setenv("AWS_ENDPOINT_URL_SQS", kLocalEndpoint, 1);
  }
  const char* endpoint = std::getenv("AWS_ENDPOINT_URL_SQS");
  if (!endpoint) endpoint = std::getenv("AWS_ENDPOINT_URL");
  if (endpoint && is_local(endpoint)) {
    ::setenv("AWS_REGION", "us-east-1", 0);
    if (!std::getenv("AWS_ACCESS_KEY_ID") && !std::getenv("AWS_PROFILE")) {
      ::setenv("AWS_ACCESS_KEY_ID", "local", 1);
      ::setenv("AWS_SECRET_ACCESS_KEY", "local", 1);
    }
  }
}

struct Queues {
  std::shared_ptr<sqs::SqsClient> client;
  std::string url;
  std::optional<std::string> dlq_url;
};

// HARVEST_SQS_QUEUE_URL as given, else device-telemetry, created with a
// redrive policy to device-telemetry-dlq if it does not exist yet.
Result<Queues> ensure_queues() {
  auto client = sqs::SqsClient::create();
  if (!client) return fail(client.error());
  Queues q{*client, {}, {}};
  if (const char* url = std::getenv("HARVEST_SQS_QUEUE_URL")) {
    q.url = url;
  } else if (auto found = q.client->get_queue_url(kQueue)) {
    q.url = *found;
  } else if (found.error().kind != ErrorKind::kNotFound) {
    return fail(found.error());
  } else {
    auto dlq = q.client->create_queue(std::string(kQueue) + "-dlq");
    if (!dlq) return fail(dlq.error());
    auto arn = q.client->get_queue_attributes(*dlq, {"QueueArn"});
    if (!arn) return fail(arn.error());
    engine::Json policy{{"deadLetterTargetArn", arn->at("QueueArn")},
                        {"maxReceiveCount", std::to_string(kMaxReceiveCount)}};
    auto created = q.client->create_queue(kQueue, {{"RedrivePolicy", policy.dump()}});
    if (!created) return fail(created.error());
    q.url = *created;
    fmt::print("created {} (redrive to {} after {} receives)\n", q.url, *dlq, kMaxReceiveCount);
  }
  // The dead-letter queue named by the redrive policy, if any: the demo watches it.
  auto attrs = q.client->get_queue_attributes(q.url, {"RedrivePolicy"});
  if (attrs && attrs->contains("RedrivePolicy")) {
    auto arn =
        engine::Json::parse(attrs->at("RedrivePolicy")).value("deadLetterTargetArn", std::string());
    if (auto dlq = q.client->get_queue_url(arn.substr(arn.rfind(':') + 1))) q.dlq_url = *dlq;
  }
  return q;
}

long visible_messages(const sqs::SqsClient& client, const std::string& queue) {
  auto a = client.get_queue_attributes(queue, {"ApproximateNumberOfMessages"});
  return a ? std::stol(a->at("ApproximateNumberOfMessages")) : -1;
}

// n readings round-robin over three devices named for this run (or for
// `suffix`, to send more readings for the same devices); returns them.
Result<std::vector<std::string>> send_readings(const Queues& q, int n, std::string suffix = {}) {
  std::string run = suffix.empty() ? std::to_string(std::random_device{}() % 10000) : suffix;
  std::vector<std::string> devices{"boiler-" + run, "pump-" + run, "fan-" + run};
  std::mt19937 rng{std::random_device{}()};
  std::normal_distribution<double> celsius(21.0, 1.5);
  for (int start = 0; start < n; start += 10) {
    std::vector<sqs::OutgoingMessage> batch;
    for (int i = start; i < std::min(n, start + 10); ++i) {
      Reading r{devices[i % devices.size()], std::round(celsius(rng) * 10) / 10};
      batch.push_back({.id = std::to_string(i), .body = engine::Json(r).dump()});
    }
    auto sent = q.client->send_message_batch(q.url, batch);
    if (!sent) return fail(sent.error());
  }
  fmt::print("sent {} readings for {}, {} and {}\n", n, devices[0], devices[1], devices[2]);
  return devices;
}

int demo(const Queues& q) {
  const long dlq_before = q.dlq_url ? visible_messages(*q.client, *q.dlq_url) : 0;
  auto devices = send_readings(q, 9);
  if (!devices) {
    std::cerr << devices.error().describe() << "\n";
    return 1;
  }
  if (auto poison = q.client->send_message(q.url, {.body = "this is not JSON"}); !poison) {
    std::cerr << poison.error().describe() << "\n";
    return 1;
  }
  fmt::print("sent 1 poison message\n");

  auto app = build_app(q.url);
  app->start();
  auto& engine = app->engine();
  auto session = [&](const std::string& device) -> std::optional<engine::ExecutionView> {
    auto id = engine.find_execution("device_session", "device-" + device);
    if (!id || !*id) return std::nullopt;
    auto run = engine.get_execution(**id);
    return run ? std::optional(*run) : std::nullopt;
  };
  auto done = [&] {
    for (const auto& d : *devices) {
      auto run = session(d);
      if (!run || run->status != "completed") return false;
    }
    return !q.dlq_url || visible_messages(*q.client, *q.dlq_url) > dlq_before;
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(200ms);
  app->stop();

  for (const auto& d : *devices) {
    auto run = session(d);
    fmt::print("device-{}: {} {}\n", d, run ? run->status : "no session",
               run ? run->output.dump() : "");
  }
  if (q.dlq_url) {
    fmt::print("{}: {} message(s); the poison one was moved there by the redrive policy\n",
               *q.dlq_url, visible_messages(*q.client, *q.dlq_url));
  }
  if (!done()) {
    std::cerr << "timed out waiting for the sessions\n";
    return 1;
  }
  return 0;
}

// Consumes until SIGINT or SIGTERM.
int run(const Queues& q) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  // Blocked before any thread starts, so only sigwait below receives them.
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto app = build_app(q.url);
  app->start();
  fmt::print("consuming {}; send readings with `sqs_connector_quickstart send`, Ctrl-C to stop\n",
             q.url);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  app->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "demo";
  default_to_local_server();
  auto queues = ensure_queues();
  if (!queues) {
    std::cerr << "cannot reach the SQS queue: " << queues.error().describe()
              << "\nstart the local server with `scripts/services/sqs.sh start`, or set "
                 "AWS_ENDPOINT_URL_SQS / HARVEST_SQS_QUEUE_URL\n";
    return 1;
  }
  try {
    if (cmd == "demo") return demo(*queues);
    if (cmd == "run") return run(*queues);
    if (cmd == "send") {
      return send_readings(*queues, argc > 2 ? std::atoi(argv[2]) : 9, argc > 3 ? argv[3] : "") ? 0
                                                                                                : 1;
    }
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: sqs_connector_quickstart [demo | run | send [n [id]]]\n";
  return 2;
}
