-- Records the outcome of a requested replay, unless it is already recorded
-- (or the replay is no longer requested).
-- $1: dead letter id, $2: outcome, $3: detail (NULL for none), $4: the
-- execution the replay started or found (NULL for none)
UPDATE harvest_connector_dead_letters SET replayed_at = now(), replay_outcome = $2,
  replay_detail = $3, replay_execution_id = $4
WHERE id = $1::uuid AND replay_requested_at IS NOT NULL AND replayed_at IS NULL
