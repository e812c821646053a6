-- A binding's dead letters whose replay is requested and not yet done,
-- oldest request first.
-- $1: binding, $2: the most rows to return
-- Returns a row per dead letter (fragments/dead_letters_columns.sql).
SELECT
\ir ../fragments/dead_letters_columns.sql
FROM harvest_connector_dead_letters
WHERE binding = $1 AND replay_requested_at IS NOT NULL AND replayed_at IS NULL
ORDER BY replay_requested_at, id LIMIT $2
