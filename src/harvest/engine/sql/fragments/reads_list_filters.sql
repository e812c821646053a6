-- The list's other filters, each null for none: $3 start source, $7
-- workflow id, $8 workflow id prefix, $9 start source ref, $10 created at or
-- after, $11 created before.
  AND ($3::text IS NULL OR start_source = $3)
  AND ($7::text IS NULL OR workflow_id = $7)
  AND ($8::text IS NULL OR starts_with(workflow_id, $8))
  AND ($9::text IS NULL OR start_source_ref = $9)
  AND ($10::timestamptz IS NULL OR created_at >= $10::timestamptz)
  AND ($11::timestamptz IS NULL OR created_at < $11::timestamptz)
