-- Sets a new session to plan prepared statements on every execution: a
-- cached generic plan made while a table was small (a fresh deployment)
-- would keep scanning it whole as it grows.
SET plan_cache_mode = force_custom_plan
