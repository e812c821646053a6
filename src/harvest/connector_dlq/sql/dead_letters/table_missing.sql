-- Whether the connector dead letters' table is missing (the connector
-- migrations were never applied to this database).
-- Returns one row, one boolean column.
SELECT to_regclass('harvest_connector_dead_letters') IS NULL
