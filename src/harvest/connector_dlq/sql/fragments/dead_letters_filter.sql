-- The operator's filter as six nullable parameters, so one statement text
-- serves every combination and no value is ever spliced into SQL (a
-- condition on harvest_connector_dead_letters' row, for after WHERE).
-- $1: id, $2: binding, $3: stream, $4: reason, $5: since (inclusive),
-- $6: until (exclusive); a NULL one matches every row.
($1::uuid IS NULL OR id = $1::uuid) AND ($2::text IS NULL OR binding = $2)
  AND ($3::text IS NULL OR stream = $3) AND ($4::text IS NULL OR reason = $4)
  AND ($5::timestamptz IS NULL OR failed_at >= $5::timestamptz)
  AND ($6::timestamptz IS NULL OR failed_at < $6::timestamptz)
