// Builds against an installed harvest (find_package(harvest CONFIG) or
// pkg-config harvest): a workflow, a MockSource connector, the plugin. With
// HARVEST_DATABASE_URL set it runs one message end to end; without, it only
// shows that everything links.
#include <cstdlib>
#include <iostream>

#include <harvest/connector/mock_source.hpp>
#include <harvest/plugin/plugin.hpp>
#include <harvest/version.hpp>
#ifdef CONSUMER_HAS_KAFKA
#include <harvest/kafka/kafka_source.hpp>
#endif

using namespace harvest;

int main() {
  std::cout << "harvest " << HARVEST_VERSION << "\n";
  engine::WorkflowRegistry workflows;
  workflows.add("greet", [](engine::WorkflowContext&, engine::Json in) {
    return "hello " + in.value("name", std::string("world"));
  });
  auto binding =
      connector::SourceBinding::starts("greetings", "greetings", "greet")
          .map_json([](const connector::MessageCtx&, engine::Json in) -> connector::MapResult {
            return connector::MappedMessage{"greet-" + in.value("name", ""), in};
          });
  auto source = std::make_shared<connector::MockSource>("greetings");
  if (!std::getenv("HARVEST_DATABASE_URL")) {
    std::cout << "linked; set HARVEST_DATABASE_URL to run one message through\n";
    return 0;
  }
  auto app = plugin::HarvestPlugin()
                 .engine_config({.profile = engine::Profile::kDev})
                 .workflows(std::move(workflows))
                 .connector(binding, source)
                 .build();
  source->push_kafka(0, 0, R"({"name":"Ada"})");
  auto pass = app->runtime("greetings").run_once();
  if (!pass || pass->acked != 1) {
    std::cerr << "the message was not dispatched\n";
    return 1;
  }
  std::cout << "dispatched 1 message; committed offset " << source->committed(0).value_or(-1)
            << "\n";
  return 0;
}
