-- For a workflow id (or prefix) without a workflow name: the runs index
-- leads with the name (and holds only named runs), so this names every
-- workflow that has a named run — read by a loose scan of that index, one
-- probe per name — and the id is then an index condition instead of a
-- filter over every row.
  AND workflow_name = ANY(ARRAY(WITH RECURSIVE names AS (
    SELECT min(workflow_name) AS n FROM harvest_workflow_executions
    WHERE workflow_id IS NOT NULL
    UNION ALL SELECT (SELECT min(workflow_name) FROM
    harvest_workflow_executions WHERE workflow_id IS NOT NULL AND
    workflow_name > names.n) FROM names
    WHERE n IS NOT NULL) SELECT n FROM names WHERE n IS NOT NULL))
