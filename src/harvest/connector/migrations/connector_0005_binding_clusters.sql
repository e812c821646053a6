-- The Kafka cluster each binding consumes from, per key incarnation: a
-- binding's coordinate keys mean something only on the cluster they were
-- derived on, so a binding (in the same incarnation) pointed at a cluster
-- with another id refuses to start until the cutover is acknowledged
-- (connector/cluster_identity.hpp).
CREATE TABLE harvest_connector_clusters (
  binding     text        NOT NULL,
  incarnation text        NOT NULL,
  cluster_id  text        NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (binding, incarnation)
);

-- A dead letter of a message with a position in an ordered log keeps its
-- record's fingerprint (connector/fingerprint.hpp): the replay of a
-- coordinate collision starts it under the binding's current namespace only
-- if no other record holds that key there.
ALTER TABLE harvest_connector_dead_letters ADD COLUMN fingerprint bigint;
