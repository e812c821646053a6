// Every migration set compiled into this build, in apply order: the engine's
// first, then each plugin module's.
#pragma once

#include <vector>

#include <harvest/store/migrations.hpp>

namespace harvest::plugin {

[[nodiscard]] std::vector<store::MigrationSet> all_migration_sets();

}  // namespace harvest::plugin
