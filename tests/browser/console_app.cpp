// The application the console's browser test drives (tests/browser): a
// Kafka binding that starts `fulfil_order` runs, a workflow that waits for a
// signal (to be cancelled from the console) and one that always fails with a
// hostile, 1 MiB error text (an engine dead letter). Two versions of the
// same app: version 1's mapper refuses orders in a currency it does not
// know yet (mapping_rejected dead letters); version 2 accepts them, so a
// dead letter replayed from the console after the upgrade starts one run.
//
//   console_app produce            creates $CONSOLE_TOPIC and produces the
//                                  scripted records; prints their offsets as
//                                  JSON on stdout
//   console_app serve              runs the app until SIGTERM/SIGINT
// Environment: HARVEST_DATABASE_URL, KAFKA_BOOTSTRAP, CONSOLE_TOPIC,
// CONSOLE_APP_VERSION (1 or 2), HARVEST_HTTP_PORT, HARVEST_API_TOKEN.
#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>
#include <harvest/plugin/plugin.hpp>

using namespace harvest;
using connector::MapResult, connector::MappedMessage, connector::MessageCtx;

namespace {

std::string env(const char* name, const char* fallback = nullptr) {
  const char* v = std::getenv(name);
  if (v && *v) return v;
  if (fallback) return fallback;
  std::cerr << "console_app: set " << name << "\n";
  std::exit(2);
}

// Text no page may execute or let reorder the layout around it.
constexpr const char* kHostile =
    "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=1\">"
    "<a href=\"javascript:window.__pwned=1\">x</a> \u202Egnp.exe";

int produce() {
  using kafka::testing::Record;
  auto broker = kafka::testing::TestBroker::connect(env("KAFKA_BOOTSTRAP"));
  if (!broker) {
    std::cerr << broker.error().message << "\n";
    return 1;
  }
  const std::string topic = env("CONSOLE_TOPIC");
  if (auto created = (*broker)->create_topic(topic, 1); !created) {
    std::cerr << created.error().message << "\n";
    return 1;
  }
  Json manifest = Json::object();
  auto send = [&](const std::string& label, Record r) -> bool {
    auto offset = (*broker)->produce(topic, r);
    if (!offset) {
      std::cerr << offset.error().message << "\n";
      return false;
    }
    manifest[label] = fmt::format("{}:0:{}", topic, *offset);
    return true;
  };
  for (int i = 1; i <= 5; ++i) {
    Json order = {{"order_id", fmt::format("A{}", i)}, {"total_cents", 100 * i}};
    // The producer's trace: the console links it to a trace viewer.
    Record r{.payload = order.dump(),
             .headers = {{"traceparent", fmt::format("00-4bf92f3577b34da6a3ce929d0e0e473{}-"
                                                     "00f067aa0ba902b7-01",
                                                     i)}}};
    if (!send(fmt::format("good{}", i), r)) return 1;
  }
  // Poison: not JSON, with a NUL, invalid UTF-8 and markup in its bytes.
  std::string poison = std::string("not json \0 \xff\xfe ", 14) + kHostile;
  if (!send("poison", Record{.key = std::string("poison-key"),
                             .payload = poison,
                             .headers = {{"x-note", kHostile},
                                         {"x-binary", std::string("\x01\x00\xfe", 3)}}})) {
    return 1;
  }
  // A currency version 1 refuses and version 2 accepts.
  Json usd = {{"order_id", "U1"}, {"total_cents", 4200}, {"currency", "USD"}};
  if (!send("fixable", Record{.payload = usd.dump()})) return 1;
  // Hostile text in an id, a payload member and a header; and a long line.
  Json hostile = {{"order_id", kHostile},
                  {"total_cents", 1},
                  {"note", std::string(kHostile) + std::string(" \0 end", 6)},
                  {"long", std::string(900 * 1024, 'L')}};
  if (!send("hostile", Record{.key = std::string(kHostile),
                              .payload = hostile.dump(),
                              .headers = {{"x-note", kHostile}}})) {
    return 1;
  }
  std::cout << manifest.dump() << std::endl;
  return 0;
}

struct Order {
  std::string order_id;
  long total_cents = 0;
  std::string currency = "EUR";
};
void from_json(const Json& j, Order& o) {
  j.at("order_id").get_to(o.order_id);
  j.at("total_cents").get_to(o.total_cents);
  if (j.contains("currency")) j.at("currency").get_to(o.currency);
}
void to_json(Json& j, const Order& o) {
  j = Json{{"order_id", o.order_id}, {"total_cents", o.total_cents}, {"currency", o.currency}};
}

int serve() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int version = std::stoi(env("CONSOLE_APP_VERSION", "1"));

  engine::WorkflowRegistry workflows;
  workflows.add("fulfil_order", [](engine::WorkflowContext& ctx, Json order) {
    auto reserved = ctx.step("reserve", [&] { return order.value("total_cents", 0); });
    auto charged = ctx.step("charge", [&] { return reserved; });
    return Json{{"charged_cents", charged}};
  });
  workflows.add("await_approval", [](engine::WorkflowContext& ctx, Json) {
    auto approval = ctx.wait_signal("approve", std::chrono::hours(1));
    return Json{{"approved", approval.has_value()}};
  });
  engine::WorkflowOptions once;
  once.max_attempts = 1;
  workflows.add(
      "always_fails",
      [](engine::WorkflowContext& ctx, Json) -> Json {
        ctx.step("try", [] { return 1; });
        throw std::runtime_error(std::string(kHostile) + " " + std::string(1 << 20, 'E'));
      },
      once);

  auto source = kafka::KafkaSource::connect(kafka::KafkaSourceConfig(env("KAFKA_BOOTSTRAP"),
                                                                     env("CONSOLE_TOPIC") + "-g",
                                                                     env("CONSOLE_TOPIC")))
                    .value();
  auto binding =
      connector::SourceBinding::starts("orders", env("CONSOLE_TOPIC"), "fulfil_order")
          .map_json([version](const MessageCtx&, Order order) -> MapResult {
            if (version < 2 && order.currency != "EUR") {
              return std::unexpected("currency " + order.currency + " is not supported yet");
            }
            return MappedMessage{"order-" + order.order_id, Json(order)};
          });
  api::ApiConfig api = api::api_config_from_env().value();
  api.trace_url_template = "http://127.0.0.1:16686/trace/{trace_id}";
  // Room for a run whose input holds a single line over 1 MiB (the console
  // shows an input whole).
  api.max_body_bytes = 4 << 20;
  auto app = plugin::HarvestPlugin()
                 .workflows(std::move(workflows))
                 .connector(binding, source)
                 .worker(engine::WorkerConfig{})
                 .api("/api/harvest", api)
                 .build();
  app->start();
  std::cout << "ready" << std::endl;
  int received = 0;
  sigwait(&stop_signals, &received);
  app->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "produce") return produce();
  if (mode == "serve") return serve();
  std::cerr << "usage: console_app produce|serve\n";
  return 2;
}
