-- A page of the dead letters the filter matches, newest first, after a
-- cursor: the page's rows come before (failed_at, id) of the cursor.
-- $1..$6: the filter (see fragments/dead_letters_filter.sql), $7: the most
-- rows to return, $8: the cursor's failed_at in microseconds since the epoch
-- (NULL for the first page), $9: the cursor's id
-- Returns a row per dead letter (fragments/dead_letters_columns.sql) and
-- `failed_us`, its failed_at in microseconds since the epoch.
SELECT
\ir ../fragments/dead_letters_columns.sql
  , (extract(epoch FROM failed_at) * 1000000)::bigint AS failed_us
FROM harvest_connector_dead_letters WHERE
\ir ../fragments/dead_letters_filter.sql
  AND ($8::bigint IS NULL OR (failed_at, id) <
    ('epoch'::timestamptz + $8::bigint * interval '1 microsecond', $9::uuid))
ORDER BY failed_at DESC, id DESC LIMIT $7
