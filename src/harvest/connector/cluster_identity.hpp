// Cluster identity: a binding's coordinate keys mean something only on the
// cluster they were derived on. Each binding records, per key incarnation,
// the id of the cluster its source reads (EventSource::cluster_id, the Kafka
// cluster id); started again against a cluster with another id, in the same
// incarnation, it refuses to start, naming both ids and the remedies: a new
// key_incarnation (a fresh namespace on the new cluster), or
// SourceBinding::cluster_cutover(<new id>) to acknowledge a deliberate move
// that keeps the namespace (the recorded id is then replaced).
#pragma once

#include <harvest/common/error.hpp>
#include <harvest/connector/binding.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::connector {

/// Records or checks the cluster `source` reads for `binding` in its key
/// incarnation (table harvest_connector_clusters, migration connector_0005).
/// Nothing to check when the source reports no cluster id. Errors: kConfig
/// naming the binding, both ids and the remedies; a store error as it came.
[[nodiscard]] Status check_cluster_identity(store::Pool& pool, const SourceBinding& binding,
                                            const EventSource& source);

}  // namespace harvest::connector
