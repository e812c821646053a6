-- Replay of connector dead letters. An operator marks rows
-- (`replay_requested_*`, from the API or `harvest connector-dlq replay`);
-- the binding's own runtime, which holds the mapper, picks marked rows up,
-- dispatches the stored payload under the row's original dedupe key and
-- records what happened (`replayed_at`, `replay_outcome`).
ALTER TABLE harvest_connector_dead_letters
  ADD COLUMN replay_requested_at timestamptz,
  ADD COLUMN replay_requested_by text,
  ADD COLUMN replayed_at         timestamptz,
  -- started | existing | deferred | dead_lettered
  ADD COLUMN replay_outcome      text,
  ADD COLUMN replay_detail       text,
  ADD COLUMN replay_execution_id text;
-- The runtime's pick-up: requested rows of one binding not yet replayed.
CREATE INDEX harvest_connector_dead_letters_replay_queue
  ON harvest_connector_dead_letters (binding, replay_requested_at)
  WHERE replay_requested_at IS NOT NULL AND replayed_at IS NULL;
-- Listing newest first without a binding filter.
CREATE INDEX harvest_connector_dead_letters_failed
  ON harvest_connector_dead_letters (failed_at, id);
