-- Deletes the dead letters the filter matches.
-- $1..$6: the filter (see fragments/dead_letters_filter.sql)
-- Returns one row: the count of rows deleted.
WITH gone AS (DELETE FROM harvest_connector_dead_letters WHERE
\ir ../fragments/dead_letters_filter.sql
  RETURNING 1)
SELECT count(*) FROM gone
