-- Runs started, completed and failed per minute since a time. Starts come
-- from the creation-time index; outcomes from the closed runs'
-- completion-time index, grouped by minute in one pass each.
-- $1: since, in seconds since the epoch
-- Returns `minute` (seconds since the epoch), `started`, `completed` and
-- `failed`, one row per minute, oldest first.
WITH m AS (
  SELECT generate_series(date_trunc('minute', to_timestamp($1::bigint)),
                         date_trunc('minute', now()), interval '1 minute') AS at),
s AS (
  SELECT date_trunc('minute', created_at) AS at, count(*) AS n
  FROM harvest_workflow_executions
  WHERE created_at >= date_trunc('minute', to_timestamp($1::bigint)) GROUP BY 1),
c AS (
  SELECT date_trunc('minute', completed_at) AS at,
         count(*) FILTER (WHERE status = 'completed') AS done,
         count(*) FILTER (WHERE status = 'failed') AS failed
  FROM harvest_workflow_executions
  WHERE completed_at >= date_trunc('minute', to_timestamp($1::bigint))
    AND status IN
\ir ../fragments/closed_statuses.sql
  GROUP BY 1)
SELECT extract(epoch FROM m.at)::bigint AS minute, coalesce(s.n, 0) AS started,
       coalesce(c.done, 0) AS completed, coalesce(c.failed, 0) AS failed
FROM m LEFT JOIN s ON s.at = m.at LEFT JOIN c ON c.at = m.at ORDER BY m.at
