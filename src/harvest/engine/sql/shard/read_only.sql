-- Whether the session's transactions are read-only: on a standby, and on a
-- primary set read-only (default_transaction_read_only, as a failover in
-- progress fences it).
-- Returns one row: `read_only`.
SELECT current_setting('transaction_read_only') = 'on' AS read_only
