-- Wakes idle workers, here and in other processes, when the transaction
-- commits: a notification on harvest_work, the channel work/listen.sql
-- subscribes them to. As a select-list item: one notification per row the
-- statement selects (PostgreSQL folds a transaction's identical ones into
-- one). Every statement that wakes workers sends it through this fragment,
-- so the senders name the channel here only; listen.sql names it once more,
-- because LISTEN takes an identifier where pg_notify takes a string.
pg_notify('harvest_work', '')
