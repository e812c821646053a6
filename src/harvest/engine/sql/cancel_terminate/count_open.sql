-- Counts the open runs matching a bulk operation's filter.
-- $1: workflow name or null, $2: status as shown or null
-- Returns one row: `n`.
SELECT count(*) AS n FROM harvest_workflow_executions e WHERE
\ir ../fragments/open_matching_filter.sql
