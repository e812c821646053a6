-- One firer per batched workflow at a time, to the end of the transaction,
-- so concurrent workers cannot split a batch that was neither full nor due.
-- $1: workflow name
SELECT pg_advisory_xact_lock(hashtext('harvest_batch:' || $1))
