// ExecutionStore: what operators do to runs (ENG-17) — request a cooperative
// cancel, terminate at once, one run or every open run matching a filter —
// and how a run that saw its cancellation ends.
#include <fmt/format.h>

#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {

namespace {

// Bulk operations change at most this many runs per transaction, so a
// filter matching millions of runs never holds one huge transaction open.
constexpr int kBulkChunk = 1000;

// One run, locked for the rest of the statement ($1 = execution id).
constexpr const char* kTarget =
    "t AS (SELECT id, workflow_name, status, " HARVEST_SHOWN_STATUS("harvest_workflow_executions")
    " AS shown_status, cancel_requested_at FROM harvest_workflow_executions "
    "  WHERE id = $1::uuid FOR NO KEY UPDATE)";

// Open runs matching the filter ($1 workflow or null, $2 status or null).
constexpr const char* kOpenWhere =
    "status NOT IN " HARVEST_CLOSED_STATUSES
    " AND ($1::text IS NULL OR workflow_name = $1) AND ($2::text IS NULL OR " HARVEST_SHOWN_STATUS(
        "harvest_workflow_executions") " = $2)";

// A pending or waiting run becomes runnable now: it replays to its next
// durable operation and sees the request there.
constexpr const char* kCancelSet =
    "cancel_requested_at = now(), cancel_reason = $2, updated_at = now(), "
    "run_after = CASE WHEN e.status IN ('pending', 'waiting') THEN LEAST(e.run_after, now()) "
    "ELSE e.run_after END";

// The run's lease (if a worker holds it) goes in the terminate's second
// statement, kDropClosedLeases; the worker's next write finds no lease.
constexpr const char* kTerminateSet =
    "status = 'terminated', error = $2, completed_at = now(), updated_at = now()";

constexpr const char* kNotify = "SELECT pg_notify('harvest_work', '')";

Result<std::optional<ExecutionStore::StopResult>> stop_result(const Result<store::PgResult>& r) {
  if (!r) return fail(r.error());
  const store::PgResult& rows = *r;
  if (rows.empty()) return std::optional<ExecutionStore::StopResult>{};
  return std::optional<ExecutionStore::StopResult>{
      ExecutionStore::StopResult{.workflow = rows.get(0, "workflow_name"),
                                 .status = rows.get(0, "status"),
                                 .cancel_requested = rows.get_bool(0, "was_requested"),
                                 .changed = rows.get_bool(0, "changed")}};
}

// Adds a chunk's (workflow_name, n) rows to `total`; returns the chunk's sum.
long long add_counts(const store::PgResult& rows, std::map<std::string, long long>& total) {
  long long chunk = 0;
  for (int i = 0; i < rows.rows(); ++i) {
    const long long n = rows.get_int(i, "n");
    total[rows.get(i, "workflow_name")] += n;
    chunk += n;
  }
  return chunk;
}

}  // namespace

Result<std::optional<ExecutionStore::StopResult>> ExecutionStore::request_cancel(
    const std::string& execution_id, const std::string& reason, const std::string& by) {
  const std::string sql = fmt::format(
      "WITH {}, "
      "upd AS (UPDATE harvest_workflow_executions e SET {} FROM t WHERE e.id = t.id "
      "  AND t.cancel_requested_at IS NULL AND t.status NOT IN " HARVEST_CLOSED_STATUSES
      "  RETURNING e.id), "
      "ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
      "  SELECT id, 'CancelRequested', jsonb_build_object('reason', $2::text, "
      "  'requested_by', $3::text) FROM upd) "
      "SELECT t.workflow_name, t.shown_status AS status, t.cancel_requested_at IS NOT NULL AS "
      "was_requested, "
      "  EXISTS (SELECT 1 FROM upd) AS changed FROM t",
      kTarget, kCancelSet);
  auto r = conn_.exec_pipeline({{sql, {execution_id, reason, by}}, {kNotify, {}}});
  return stop_result(r ? Result<store::PgResult>(std::move(r->front())) : fail(r.error()));
}

Result<std::optional<ExecutionStore::StopResult>> ExecutionStore::terminate(
    const std::string& execution_id, const std::string& reason, const std::string& by) {
  const std::string sql = fmt::format(
      "WITH {}, "
      "upd AS (UPDATE harvest_workflow_executions e SET {} FROM t WHERE e.id = t.id "
      "  AND t.status NOT IN " HARVEST_CLOSED_STATUSES
      "  RETURNING e.id), "
      "ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
      "  SELECT id, 'WorkflowTerminated', jsonb_build_object('reason', $2::text, "
      "  'requested_by', $3::text) FROM upd) "
      "SELECT t.workflow_name, t.shown_status AS status, t.cancel_requested_at IS NOT NULL AS "
      "was_requested, "
      "  EXISTS (SELECT 1 FROM upd) AS changed FROM t",
      kTarget, kTerminateSet);
  auto r = conn_.exec_pipeline({{sql, {execution_id, reason, by}}, {kDropClosedLeases, {}}});
  return stop_result(r ? Result<store::PgResult>(std::move(r->front())) : fail(r.error()));
}

Result<long long> ExecutionStore::count_open(const StopFilter& filter) {
  auto r = conn_.exec(
      fmt::format("SELECT count(*) AS n FROM harvest_workflow_executions WHERE {}", kOpenWhere),
      {filter.workflow, filter.status});
  if (!r) return fail(r.error());
  return r->get_int(0, "n");
}

Result<std::map<std::string, long long>> ExecutionStore::request_cancel_where(
    const StopFilter& filter, const std::string& reason, const std::string& by) {
  // $1/$2 the filter, $3 the reason, $4 who asked.
  const std::string sql = fmt::format(
      "WITH t AS (SELECT id FROM harvest_workflow_executions WHERE {} "
      "  AND cancel_requested_at IS NULL ORDER BY id LIMIT {} FOR NO KEY UPDATE), "
      "upd AS (UPDATE harvest_workflow_executions e SET cancel_requested_at = now(), "
      "  cancel_reason = $3, updated_at = now(), run_after = CASE WHEN e.status IN "
      "  ('pending', 'waiting') THEN LEAST(e.run_after, now()) ELSE e.run_after END "
      "  FROM t WHERE e.id = t.id RETURNING e.id, e.workflow_name), "
      "ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
      "  SELECT id, 'CancelRequested', jsonb_build_object('reason', $3::text, "
      "  'requested_by', $4::text) FROM upd) "
      "SELECT workflow_name, count(*) AS n FROM upd GROUP BY workflow_name",
      kOpenWhere, kBulkChunk);
  std::map<std::string, long long> total;
  for (;;) {
    auto r =
        conn_.exec_pipeline({{sql, {filter.workflow, filter.status, reason, by}}, {kNotify, {}}});
    if (!r) return fail(r.error());
    if (add_counts(r->front(), total) < kBulkChunk) return total;
  }
}

Result<std::map<std::string, long long>> ExecutionStore::terminate_where(const StopFilter& filter,
                                                                         const std::string& reason,
                                                                         const std::string& by) {
  const std::string sql = fmt::format(
      "WITH t AS (SELECT id FROM harvest_workflow_executions WHERE {} "
      "  ORDER BY id LIMIT {} FOR NO KEY UPDATE), "
      "upd AS (UPDATE harvest_workflow_executions e SET status = 'terminated', error = $3, "
      "  completed_at = now(), updated_at = now() "
      "  FROM t WHERE e.id = t.id RETURNING e.id, e.workflow_name), "
      "ev AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
      "  SELECT id, 'WorkflowTerminated', jsonb_build_object('reason', $3::text, "
      "  'requested_by', $4::text) FROM upd) "
      "SELECT workflow_name, count(*) AS n FROM upd GROUP BY workflow_name",
      kOpenWhere, kBulkChunk);
  std::map<std::string, long long> total;
  for (;;) {
    auto r = conn_.exec_pipeline(
        {{sql, {filter.workflow, filter.status, reason, by}}, {kDropClosedLeases, {}}});
    if (!r) return fail(r.error());
    if (add_counts(r->front(), total) < kBulkChunk) return total;
  }
}

Result<std::string> ExecutionStore::cancel_reason(const std::string& execution_id) {
  auto r = conn_.exec(
      "SELECT COALESCE(cancel_reason, '') AS reason FROM harvest_workflow_executions "
      "WHERE id = $1::uuid",
      {execution_id});
  if (!r) return fail(r.error());
  return r->empty() ? std::string() : r->get(0, "reason");
}

Result<bool> ExecutionStore::finish_cancelled(const Fence& fence, const Json& output,
                                              const std::optional<std::string>& error) {
  auto r = conn_.exec(
      fmt::format(
          "WITH " HARVEST_HELD_CTES
          ", done AS (UPDATE harvest_workflow_executions SET status = 'cancelled', "
          "output = $3::jsonb, error = $4, completed_at = now(), updated_at = now() FROM held "
          "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES
          " RETURNING id, cancel_reason) "
          "INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
          "SELECT id, 'WorkflowCancelled', jsonb_strip_nulls(jsonb_build_object('reason', "
          "cancel_reason, 'output', $3::jsonb, 'error', $4::text)) FROM done RETURNING "
          "execution_id"),
      {fence.execution_id, fence.lease, output.dump(), error});
  if (!r) return fail(r.error());
  return !r->empty();
}

}  // namespace harvest::engine
