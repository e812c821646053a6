-- The runs started and closed within a recent window. Both windows read an
-- index (created_at; completed_at, closed runs).
-- $1: the window, in seconds
-- Returns one row: `started` and `completed`.
SELECT (SELECT count(*) FROM harvest_workflow_executions WHERE created_at > now() -
    $1 * interval '1 second') AS started,
  (SELECT count(*) FROM harvest_workflow_executions WHERE completed_at > now() -
    $1 * interval '1 second' AND status IN
\ir ../fragments/closed_statuses.sql
  ) AS completed
