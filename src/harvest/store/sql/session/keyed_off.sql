-- After a pipeline's Plan::kKeyed statements, on a session of its own: back
-- to the session's custom plans and sequential scans (undoes keyed_on).
-- Returns one row (dropped).
SELECT set_config('plan_cache_mode', 'force_custom_plan', false),
  set_config('enable_seqscan', 'on', false)
