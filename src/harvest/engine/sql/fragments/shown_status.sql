-- A run's status as readers see it, for the execution row `e` (an
-- expression): a pending or waiting run with a lease is running.
(CASE WHEN e.status IN ('pending', 'waiting') AND
\ir has_lease.sql
THEN 'running' ELSE e.status END)
