-- Writes a dead letter, one row per dedupe key: a redelivery of a
-- dead-lettered message writes nothing. (A different record under the same
-- key, told apart by its fingerprint, is written again by the caller under
-- the key with its fingerprint appended.)
-- $1: binding, $2: stream, $3: coordinates (rendered), $4: dedupe key,
-- $5: reason, $6: detail, $7: attempts, $8: payload (bytea hex input form),
-- $9: structured coordinates (jsonb, or NULL), $10: record key (bytea hex
-- input form, or NULL), $11: headers (jsonb, or NULL), $12: fingerprint
-- (or NULL)
-- Returns one row: `written` (1 or 0), and `taken`, the fingerprint of the
-- row already holding the key when nothing was written.
WITH ins AS (INSERT INTO harvest_connector_dead_letters
  (binding, stream, coordinates, idempotency_key, reason, detail, attempts, payload,
   coordinates_structured, record_key, headers, fingerprint)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8::bytea, $9::jsonb, $10::bytea, $11::jsonb,
    $12::bigint)
  ON CONFLICT (idempotency_key) DO NOTHING RETURNING 1)
SELECT (SELECT count(*) FROM ins) AS written,
  (SELECT fingerprint FROM harvest_connector_dead_letters WHERE idempotency_key = $4
   AND NOT EXISTS (SELECT 1 FROM ins)) AS taken
