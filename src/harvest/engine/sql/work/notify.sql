-- Wakes idle workers, here and in other processes (they LISTEN on
-- harvest_work), when the transaction commits.
SELECT pg_notify('harvest_work', '')
