-- Records the cluster for a binding seen for the first time, and returns
-- what is recorded now (the new row or the earlier one).
-- $1: binding, $2: key incarnation, $3: cluster id
-- Returns one row: `cluster_id`, the cluster recorded for the binding.
WITH ins AS (INSERT INTO harvest_connector_clusters (binding, incarnation, cluster_id)
  VALUES ($1, $2, $3) ON CONFLICT (binding, incarnation) DO NOTHING RETURNING cluster_id)
SELECT cluster_id FROM ins UNION ALL
SELECT cluster_id FROM harvest_connector_clusters WHERE binding = $1 AND incarnation = $2
LIMIT 1
