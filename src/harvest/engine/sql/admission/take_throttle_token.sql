-- Counts one start against the workflow's current throttle window.
-- $1: workflow name
UPDATE harvest_admission_throttle SET used = used + 1 WHERE workflow_name = $1
