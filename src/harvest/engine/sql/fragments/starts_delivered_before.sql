-- Whether the batch item `i`'s signal key was delivered to some run of its
-- workflow id (the dedupe spans the runs of an entity), as a condition.
(i.key IS NOT NULL AND EXISTS (SELECT 1 FROM harvest_signals s
JOIN harvest_workflow_executions x ON x.id = s.execution_id
WHERE x.workflow_name = i.wf AND x.workflow_id = i.wid AND s.idempotency_key = i.key))
