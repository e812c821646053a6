-- The console's and the API's status filters (GET /executions?status=...)
-- read runs of one status newest first. A run is `completed` most of its
-- life, and a walk of the creation-time index finds a page of those at
-- once; every other status can be rare (a failure, a cancelled run, a
-- backlog of pending ones), and a walk would read the whole table to find
-- none. This index holds the runs that are not completed, by status and
-- creation time: one entry when a run starts (pending), none when it
-- completes, one when it fails, waits, is cancelled or terminated.
-- Held runs (shown as running) are found from harvest_run_leases.
CREATE INDEX harvest_executions_by_status ON harvest_workflow_executions (status, created_at, id)
  WHERE status <> 'completed';
