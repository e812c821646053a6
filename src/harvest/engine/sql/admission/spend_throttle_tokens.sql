-- Counts fired deferred starts against the workflow's current throttle
-- window.
-- $1: workflow name, $2: how many were fired
UPDATE harvest_admission_throttle SET used = used + $2 WHERE workflow_name = $1
