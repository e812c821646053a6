// Dead-letter destinations for poison messages (CON-10).
#pragma once

#include "store/migrations.hpp"

namespace harvest::connector {

// The connector's migration set ("connector"): harvest_connector_dead_letters.
[[nodiscard]] store::MigrationSet connector_migrations();

}  // namespace harvest::connector
