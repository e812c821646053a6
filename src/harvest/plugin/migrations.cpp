#include <harvest/engine/engine.hpp>
#include <harvest/plugin/migrations.hpp>
#if HARVEST_WITH_CONNECTORS
#include <harvest/connector/dead_letter.hpp>
#endif

namespace harvest::plugin {

std::vector<store::MigrationSet> all_migration_sets() {
  std::vector<store::MigrationSet> sets{engine::engine_migrations()};
#if HARVEST_WITH_CONNECTORS
  sets.push_back(connector::connector_migrations());
#endif
  return sets;
}

}  // namespace harvest::plugin
