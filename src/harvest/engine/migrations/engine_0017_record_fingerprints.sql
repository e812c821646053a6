-- A start or a signal keyed by broker coordinates keeps a 64-bit fingerprint
-- of the record it came from (connector/fingerprint.hpp says what it covers).
-- A later message under the same key is a redelivery only when its
-- fingerprint matches; a different one is a coordinate collision (a
-- recreated topic, a new cluster) and is never acknowledged as a duplicate.
-- Rows written before this migration, and starts not keyed by coordinates,
-- have none: a key hit on them is a redelivery, as it always was.
-- Both columns are nullable without a default, so adding them rewrites
-- nothing: the lock is held for a catalog update only, whatever the size of
-- the tables.
ALTER TABLE harvest_workflow_executions ADD COLUMN key_fingerprint bigint;
ALTER TABLE harvest_signals ADD COLUMN fingerprint bigint;
