-- Moves a binding to another cluster, as its cluster_cutover acknowledges.
-- $1: binding, $2: key incarnation, $3: the new cluster id
UPDATE harvest_connector_clusters SET cluster_id = $3, recorded_at = now()
WHERE binding = $1 AND incarnation = $2
