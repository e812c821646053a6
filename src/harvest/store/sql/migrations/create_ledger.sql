-- Creates the migration ledger unless it exists: a row per applied
-- migration.
CREATE TABLE IF NOT EXISTS harvest_schema_migrations (
  set_name   text        NOT NULL,
  version    integer     NOT NULL,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (set_name, version)
)
