// Versioned SQL migrations.
//
// Each module owns a `MigrationSet` of numbered SQL files embedded in the
// binary at build time (cmake/EmbedSql.cmake). Applied versions are recorded
// in `harvest_schema_migrations (set_name, version)`. Application is
// serialised across processes with an advisory lock, and each migration runs
// in its own transaction together with its ledger row.
#pragma once

#include <string>
#include <vector>

#include <harvest/store/pg.hpp>

namespace harvest::store {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

struct MigrationSet {
  std::string name;  // "engine", "connector", ...
  std::vector<Migration> migrations;
};

struct PendingMigration {
  std::string set_name;
  int version;
  std::string name;
  [[nodiscard]] std::string label() const;  // "engine/0001_core"
};

// Migrations of `sets` not yet recorded in the ledger (an absent ledger means
// every migration is pending).
[[nodiscard]] Result<std::vector<PendingMigration>> pending_migrations(
    Connection& conn, const std::vector<MigrationSet>& sets);

// Applies every pending migration, in set order then version order. Returns
// the ones applied (empty when already up to date).
[[nodiscard]] Result<std::vector<PendingMigration>> apply_migrations(
    Connection& conn, const std::vector<MigrationSet>& sets);

}  // namespace harvest::store
