-- Before a pipeline's Plan::kKeyed statements, on a session of its own:
-- generic plans, made with sequential scans disabled (undone by keyed_off).
-- Returns one row (dropped).
SELECT set_config('plan_cache_mode', 'force_generic_plan', false),
  set_config('enable_seqscan', 'off', false)
