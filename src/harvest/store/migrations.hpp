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

#include <harvest/common/error.hpp>

namespace harvest::store {

class Connection;  // <harvest/store/pg.hpp>, internal

/// One numbered SQL file of a MigrationSet (NNNN_name.sql). A plain value.
struct Migration {
  int version;       ///< the file's number (NNNN); with the set's name, its key in the ledger
  std::string name;  ///< the file's name after the number, e.g. "core"
  std::string sql;   ///< the file's SQL, run as one script in the transaction recording it
};

/// The migrations one module owns, under the name the ledger records them by.
/// A plain value.
struct MigrationSet {
  std::string name;                   ///< "engine", "connector", ...
  std::vector<Migration> migrations;  ///< in version order, the order they are applied in
};

/// A migration not yet recorded in the ledger (or, from apply_migrations,
/// just applied). A plain value.
struct PendingMigration {
  std::string set_name;  ///< the MigrationSet::name it belongs to
  int version;           ///< its Migration::version
  std::string name;      ///< its Migration::name
  /// The migration as shown in logs and errors: "engine/0001_core".
  [[nodiscard]] std::string label() const;
};

/// Migrations of `sets` not yet recorded in the ledger (an absent ledger means
/// every migration is pending).
[[nodiscard]] Result<std::vector<PendingMigration>> pending_migrations(
    Connection& conn, const std::vector<MigrationSet>& sets);

/// Applies every pending migration, in set order then version order. Returns
/// the ones applied (empty when already up to date).
[[nodiscard]] Result<std::vector<PendingMigration>> apply_migrations(
    Connection& conn, const std::vector<MigrationSet>& sets);

}  // namespace harvest::store
