#include "connector/dead_letter.hpp"

harvest::store::MigrationSet harvest_migrations_connector();

namespace harvest::connector {

store::MigrationSet connector_migrations() {
  return harvest_migrations_connector();
}

}  // namespace harvest::connector
