-- The open runs matching a bulk operation's filter, as conditions on the
-- execution row `e` ($1 workflow or null, $2 status as shown or null).
e.status NOT IN
\ir closed_statuses.sql
  AND ($1::text IS NULL OR e.workflow_name = $1) AND ($2::text IS NULL OR
\ir shown_status.sql
  = $2)
