#include <fmt/format.h>

#include <harvest/common/log.hpp>
#include <harvest/connector/cluster_identity.hpp>
#include <harvest/connector/sql/clusters.hpp>

namespace harvest::connector {

namespace {

std::string incarnation_label(const SourceBinding& b) {
  return b.incarnation().empty() ? std::string("the default key incarnation")
                                 : fmt::format("key incarnation '{}'", b.incarnation());
}

}  // namespace

Status check_cluster_identity(store::Pool& pool, const SourceBinding& binding,
                              const EventSource& source) {
  const auto actual = source.cluster_id();
  if (!actual) return {};
  const std::string& cutover = binding.cluster_cutover_id();
  if (!cutover.empty() && cutover != *actual) {
    return fail(Error::config(fmt::format(
        "binding '{}' acknowledges a cutover to cluster '{}' (cluster_cutover), but its source "
        "reads cluster '{}': point the source at the new cluster, or fix the id",
        binding.name(), cutover, *actual)));
  }
  auto conn = pool.acquire();
  if (!conn) return fail(conn.error());
  auto recorded =
      (*conn)->exec(sql::clusters::record, {binding.name(), binding.incarnation(), *actual});
  if (!recorded) return fail(recorded.error());
  if (recorded->empty()) return fail(Error::internal("recording the binding's cluster failed"));
  const std::string earlier = recorded->get(0, "cluster_id");
  if (earlier == *actual) return {};
  if (cutover == *actual) {
    auto moved =
        (*conn)->exec(sql::clusters::cutover, {binding.name(), binding.incarnation(), *actual});
    if (!moved) return fail(moved.error());
    log::warn(
        "binding '{}' ({}) moves from cluster '{}' to cluster '{}', as cluster_cutover "
        "acknowledges; remove cluster_cutover once the cutover is done",
        binding.name(), incarnation_label(binding), earlier, *actual);
    return {};
  }
  return fail(Error::config(fmt::format(
      "binding '{}' ({}) consumed from Kafka cluster '{}' and its source now reads cluster '{}': "
      "its dedupe keys are positions on the first cluster, and records of the second at the "
      "same positions would be taken for redeliveries. Give the binding a new key_incarnation "
      "for the new cluster, or, for a deliberate move that keeps the namespace, acknowledge it "
      "with cluster_cutover(\"{}\")",
      binding.name(), incarnation_label(binding), earlier, *actual, *actual)));
}

}  // namespace harvest::connector
