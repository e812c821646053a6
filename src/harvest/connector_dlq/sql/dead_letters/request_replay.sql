-- Requests a replay of the dead letters the filter matches, at most $8 of
-- them, newest first. Markable: never requested, or last replayed into a
-- dead letter again (the cause may have been fixed since). Pending and
-- successfully replayed rows are only counted: marking them again would
-- change nothing.
-- $1..$6: the filter (see fragments/dead_letters_filter.sql), $7: who
-- requests it, $8: the most rows to mark
-- Returns one row: `requested` (rows marked now), `pending` (matching rows
-- requested and not yet replayed), `replayed` (matching rows replayed other
-- than into a dead letter).
WITH matching AS (SELECT id, replay_requested_at, replayed_at, replay_outcome
  FROM harvest_connector_dead_letters WHERE
\ir ../fragments/dead_letters_filter.sql
),
markable AS (SELECT id FROM harvest_connector_dead_letters WHERE
\ir ../fragments/dead_letters_filter.sql
  AND (replay_requested_at IS NULL OR replay_outcome = 'dead_lettered')
  ORDER BY failed_at DESC, id DESC LIMIT $8 FOR UPDATE),
marked AS (UPDATE harvest_connector_dead_letters d SET replay_requested_at = now(),
  replay_requested_by = $7, replayed_at = NULL, replay_outcome = NULL,
  replay_detail = NULL, replay_execution_id = NULL
  FROM markable WHERE d.id = markable.id RETURNING d.id)
SELECT (SELECT count(*) FROM marked) AS requested,
  (SELECT count(*) FROM matching WHERE replay_requested_at IS NOT NULL
     AND replayed_at IS NULL) AS pending,
  (SELECT count(*) FROM matching WHERE replayed_at IS NOT NULL
     AND replay_outcome <> 'dead_lettered') AS replayed
