-- What a claim returns for each run it took: `n` holds the claimed rows (as
-- locked, so the newest version), `l` their leases. The select list ends with
-- a comma: the statement adds the run's `crash_count` as it stands after the
-- claim, then its FROM.
SELECT n.id::text AS id, l.lease_owner, n.workflow_name, n.workflow_id, n.input::text AS input,
  n.attempt, n.max_attempts, n.signal_seq, n.entity_reuse, n.start_trace::text AS start_trace,
  (extract(epoch FROM n.run_after) * 1000000)::bigint AS run_after_us,
  n.cancel_requested_at IS NOT NULL AS cancel_requested,
  (extract(epoch FROM now()) * 1000)::bigint AS db_now_ms,
