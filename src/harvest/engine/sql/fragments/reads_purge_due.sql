-- The conditions of retention's purge on an execution row (after the
-- workflow's condition): closed, completed longer ago than the age ($2, in
-- seconds), and not holding its start's key (a run holding its start's key
-- stays until the key's window lapses).
  AND status IN
\ir closed_statuses.sql
  AND completed_at < now() - $2 * interval '1 second'
  AND (key_expires_at IS NULL OR key_expires_at <= now())
