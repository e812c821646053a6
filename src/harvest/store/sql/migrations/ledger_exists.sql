-- Whether the migration ledger exists yet.
-- Returns one row: `present`.
SELECT to_regclass('harvest_schema_migrations') IS NOT NULL AS present
