-- Serialises the claims of one keyed workflow, to the end of the
-- transaction (ENG-19).
-- $1: the workflow's name
SELECT pg_advisory_xact_lock(hashtext('harvest.concurrency'), hashtext($1))
