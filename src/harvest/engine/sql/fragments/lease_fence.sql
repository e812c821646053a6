-- The fence a write of a run's history carries, as a locking read of its
-- lease ($1 = execution id, $2 = lease token): one row (`id`) while the
-- token holds the run. FOR KEY SHARE holds off a takeover (it changes the
-- token, a unique key) and the lease's deletion until the write commits,
-- and never a renewal (which changes only the expiry).
SELECT execution_id AS id FROM harvest_run_leases WHERE execution_id = $1::uuid AND
  lease_owner = $2 FOR KEY SHARE
