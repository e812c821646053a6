-- The columns a dead letter is read with (see rows_of in
-- dead_letter_store.cpp), for a SELECT list: times as UTC RFC 3339 text,
-- bytes as hex.
id::text AS id, binding, stream, coordinates, coordinates_structured::text AS
  coordinates_structured, idempotency_key, reason, detail, attempts,
  encode(payload, 'hex') AS payload_hex, encode(record_key, 'hex') AS key_hex,
  headers::text AS headers, fingerprint,
  to_char(failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS failed,
  to_char(replay_requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS requested,
  replay_requested_by,
  to_char(replayed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS replayed,
  replay_outcome, replay_detail, replay_execution_id
