-- The dead letters the filter matches, newest first.
-- $1..$6: the filter (see fragments/dead_letters_filter.sql), $7: the most
-- rows to return
-- Returns a row per dead letter (fragments/dead_letters_columns.sql).
SELECT
\ir ../fragments/dead_letters_columns.sql
FROM harvest_connector_dead_letters WHERE
\ir ../fragments/dead_letters_filter.sql
ORDER BY failed_at DESC, id DESC LIMIT $7
