#include "plugin/migrations.hpp"

#include "engine/engine.hpp"
#if HARVEST_WITH_CONNECTORS
#include "connector/dead_letter.hpp"
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
