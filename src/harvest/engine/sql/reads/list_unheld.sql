-- A page of the pending or waiting runs that no worker holds (those shown as
-- pending or waiting), read from harvest_executions_by_status in creation
-- order (migration engine_0019).
-- $1: workflow name, $2: 'pending' or 'waiting',
-- $3: start source, $4: cursor's created_us (null: the first page),
-- $5: cursor's execution id, $6: page size, $7: workflow id, $8: workflow
-- id prefix, $9: start source ref, $10: created at or after, $11: created
-- before; each filter null for none
-- Returns `id`, `workflow_name`, `workflow_id`, `status` (as shown),
-- `start_source`, `start_source_ref`, `attempt`, `created_us`, `created` and
-- `completed`, newest first.
\ir ../fragments/reads_list_head.sql
  AND status = $2 AND status <> 'completed' AND NOT
\ir ../fragments/has_lease.sql
\ir ../fragments/reads_list_filters.sql
\ir ../fragments/reads_list_page.sql
