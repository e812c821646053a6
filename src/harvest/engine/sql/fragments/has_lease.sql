-- Whether the execution row `e` has a lease, as a scalar subquery: one index
-- probe per row, whatever the plan. (PostgreSQL may run an EXISTS as a hashed
-- subplan or a join that reads the whole lease table, and that table churns:
-- a lease lives from claim to outcome, so between vacuums it is mostly dead
-- rows.)
((SELECT true FROM harvest_run_leases hl WHERE hl.execution_id = e.id) IS NOT NULL)
