-- The migrations the ledger records as applied.
-- Returns a row per migration: `set_name`, `version`.
SELECT set_name, version FROM harvest_schema_migrations
