-- One execution as readers see it: its row, its status as shown, and its
-- lease (if any; the caller shows it only while the run is running). Times
-- are ISO 8601 UTC text.
-- $1: execution id
-- Returns one row or none: `id`, `workflow_name`, `workflow_id`, `status`,
-- `input`, `output`, `error`, `start_source`, `start_source_ref`,
-- `start_trace`, `attempt`, `run_no`, `current`, `lease_owner`,
-- `lease_expires`, `created`, `completed`.
SELECT e.id, e.workflow_name, e.workflow_id,
\ir ../fragments/shown_status.sql
  AS status, e.input::text AS input, e.output::text AS output, e.error,
  e.start_source, e.start_source_ref, e.start_trace::text AS start_trace, e.attempt,
  e.run_no, NOT e.superseded AS current, l.lease_owner,
  to_char(l.lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS lease_expires,
  to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created,
  to_char(e.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS completed
FROM harvest_workflow_executions e LEFT JOIN harvest_run_leases l
  ON l.execution_id = e.id WHERE e.id = $1::uuid
