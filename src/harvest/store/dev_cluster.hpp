// A private PostgreSQL cluster for development (ENG-2).
//
// With no database URL in the dev profile, harvest runs its own cluster under
// a data directory: `initdb` on first use, `pg_ctl start` when it is not
// running, reused across runs. Binaries come from Debian's PostgreSQL
// packages (/usr/lib/postgresql/<v>/bin) or PATH. PostgreSQL refuses to run as
// root, so under root the cluster is run as the `postgres` system user.
#pragma once

#include <filesystem>
#include <string>

#include <harvest/common/error.hpp>

namespace harvest::store {

struct DevClusterConfig {
  // Cluster data directory. Default: $HARVEST_DATA_DIR, else ./.harvest/pg.
  std::filesystem::path data_dir;
  // TCP port on 127.0.0.1. Default: $HARVEST_DEV_PG_PORT, else 54329.
  int port = 0;
};

// Ensures the cluster exists, is running and has a `harvest` database; returns
// its connection URL. Synchronous (initdb takes a few seconds the first time).
[[nodiscard]] Result<std::string> ensure_dev_cluster(DevClusterConfig config = {});

// Directory of the PostgreSQL server binaries (initdb, pg_ctl), or an error
// naming what to install.
[[nodiscard]] Result<std::filesystem::path> postgres_bindir();

}  // namespace harvest::store
