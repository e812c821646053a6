-- Serialises every queue operation on one lock name, to the end of the
-- transaction.
-- $1: the lock's name
SELECT pg_advisory_xact_lock(hashtext('harvest.mutex'), hashtext($1))
