-- Creates a workflow's throttle row (a window starting now, no tokens used)
-- unless it has one.
-- $1: workflow name
INSERT INTO harvest_admission_throttle VALUES ($1, now(), 0)
ON CONFLICT (workflow_name) DO NOTHING
