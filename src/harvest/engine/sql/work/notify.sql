-- Wakes idle workers, here and in other processes (they LISTEN on
-- harvest_work), when the transaction commits.
-- Returns one row (a void value).
SELECT
\ir ../fragments/notify_work.sql
