-- The list's page: after the cursor ($4, created_at in microseconds since
-- the epoch, or null for the first page; $5 the cursor's execution id),
-- newest first, at most $6 rows. The cursor is a row comparison on
-- (created_at, id), which the creation-time indexes serve; microseconds are
-- exact.
  AND ($4::bigint IS NULL OR (created_at, id) <
       ('epoch'::timestamptz + $4::bigint * interval '1 microsecond', $5::uuid))
ORDER BY created_at DESC, id DESC LIMIT $6
