-- Gathers the planner's statistics for the tables the durable path reads.
ANALYZE harvest_workflow_executions, harvest_workflow_events, harvest_signals
