// ExecutionStore: the durable mutex (ENG-20). A name's queue is its rows in
// harvest_mutex_queue, in seq order; the holder is the first row whose run
// is still open. Each call takes the name's advisory lock first, in the same
// implicit transaction, so queueing, granting and releasing a name happen
// one at a time and in commit order: a row's seq order is its queue order,
// and a release that commits before a waiter's check is seen by that check,
// while one that commits after it wakes that waiter.
#include <fmt/format.h>

#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {

namespace {

// $1 is the lock's name.
constexpr const char* kNameLock =
    "SELECT pg_advisory_xact_lock(hashtext('harvest.mutex'), hashtext($1))";

// Wakes the first open run in line for $1 unless it already holds the lock:
// its wake counter moves (a suspend racing with this stays runnable) and a
// waiting run becomes due now; idle workers are told.
constexpr const char* kWakeNext =
    "WITH head AS (SELECT q.execution_id, q.granted_at FROM harvest_mutex_queue q "
    "  JOIN harvest_workflow_executions e ON e.id = q.execution_id "
    "  WHERE q.name = $1 AND e.status NOT IN " HARVEST_CLOSED_STATUSES
    "  ORDER BY q.seq LIMIT 1), "
    "woken AS (UPDATE harvest_workflow_executions e SET signal_seq = e.signal_seq + 1, "
    "  run_after = CASE WHEN e.status = 'waiting' THEN LEAST(e.run_after, now()) "
    "  ELSE e.run_after END, updated_at = now() "
    "  FROM head WHERE e.id = head.execution_id AND head.granted_at IS NULL RETURNING e.id) "
    "SELECT pg_notify('harvest_work', '') FROM woken";

}  // namespace

Result<bool> ExecutionStore::enqueue_lock(const Fence& fence, const std::string& name) {
  const std::string sql = fmt::format(
      "WITH f AS ({}), "
      "ins AS (INSERT INTO harvest_mutex_queue (name, execution_id) SELECT $3, id FROM f "
      "  ON CONFLICT (name, execution_id) DO NOTHING) "
      "SELECT EXISTS (SELECT 1 FROM f) AS fenced",
      kLeaseFence);
  auto r =
      conn_.exec_pipeline({{kNameLock, {name}}, {sql, {fence.execution_id, fence.lease, name}}});
  if (!r) return fail(r.error());
  return r->back().get_bool(0, "fenced");
}

Result<bool> ExecutionStore::try_grant_lock(const std::string& execution_id,
                                            const std::string& name) {
  // First in line: no open run queued before it, and none holding it
  // (a holder is always first; the second test keeps that true by
  // construction rather than by argument).
  const std::string sql =
      "UPDATE harvest_mutex_queue q SET granted_at = COALESCE(q.granted_at, now()) "
      "WHERE q.name = $1 AND q.execution_id = $2::uuid AND NOT EXISTS ("
      "  SELECT 1 FROM harvest_mutex_queue o JOIN harvest_workflow_executions e "
      "  ON e.id = o.execution_id WHERE o.name = $1 AND o.execution_id <> $2::uuid "
      "  AND e.status NOT IN " HARVEST_CLOSED_STATUSES
      "  AND (o.seq < q.seq OR o.granted_at IS NOT NULL)) "
      "RETURNING q.seq";
  auto r = conn_.exec_pipeline({{kNameLock, {name}}, {sql, {name, execution_id}}});
  if (!r) return fail(r.error());
  return !r->back().empty();
}

Result<bool> ExecutionStore::release_lock(const Fence& fence, const std::string& name) {
  const std::string sql = fmt::format(
      "WITH f AS ({}), "
      "gone AS (DELETE FROM harvest_mutex_queue q USING f WHERE q.execution_id = f.id "
      "  AND q.name = $3) "
      "SELECT EXISTS (SELECT 1 FROM f) AS fenced",
      kLeaseFence);
  auto r = conn_.exec_pipeline(
      {{kNameLock, {name}}, {sql, {fence.execution_id, fence.lease, name}}, {kWakeNext, {name}}});
  if (!r) return fail(r.error());
  return (*r)[1].get_bool(0, "fenced");
}

Result<int> ExecutionStore::sweep_locks() {
  auto names = conn_.exec(
      "SELECT DISTINCT q.name FROM harvest_mutex_queue q WHERE NOT EXISTS ("
      "  SELECT 1 FROM harvest_workflow_executions e WHERE e.id = q.execution_id "
      "  AND e.status NOT IN " HARVEST_CLOSED_STATUSES ")");
  if (!names) return fail(names.error());
  for (int i = 0; i < names->rows(); ++i) {
    const std::string name = names->get(i, "name");
    auto r = conn_.exec_pipeline(
        {{kNameLock, {name}},
         {"DELETE FROM harvest_mutex_queue q WHERE q.name = $1 AND NOT EXISTS ("
          "  SELECT 1 FROM harvest_workflow_executions e WHERE e.id = q.execution_id "
          "  AND e.status NOT IN " HARVEST_CLOSED_STATUSES ")",
          {name}},
         {kWakeNext, {name}}});
    if (!r) return fail(r.error());
  }
  return names->rows();
}

}  // namespace harvest::engine
