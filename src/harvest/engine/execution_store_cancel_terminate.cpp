// ExecutionStore: what operators do to runs (ENG-17) — request a cooperative
// cancel, terminate at once, one run or every open run matching a filter —
// and how a run that saw its cancellation ends.
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/cancel_terminate.hpp>
#include <harvest/engine/sql/work.hpp>

namespace harvest::engine {

namespace {

// Bulk operations change at most this many runs per transaction, so a
// filter matching millions of runs never holds one huge transaction open.
constexpr int kBulkChunk = 1000;

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

// Runs `change` (parameters: the filter's workflow and status, reason, by,
// chunk size) chunk by chunk, each with `follow_up` in the same implicit
// transaction, until a chunk changes fewer than kBulkChunk runs; returns the
// runs changed per workflow.
Result<std::map<std::string, long long>> in_chunks(store::Connection& conn, std::string_view change,
                                                   std::string_view follow_up,
                                                   const StopFilter& filter,
                                                   const std::string& reason,
                                                   const std::string& by) {
  std::map<std::string, long long> total;
  for (;;) {
    auto r = conn.exec_pipeline(
        {{change, {filter.workflow, filter.status, reason, by, std::to_string(kBulkChunk)}},
         {follow_up, {}}});
    if (!r) return fail(r.error());
    if (add_counts(r->front(), total) < kBulkChunk) return total;
  }
}

}  // namespace

Result<std::optional<ExecutionStore::StopResult>> ExecutionStore::request_cancel(
    const std::string& execution_id, const std::string& reason, const std::string& by) {
  auto r = conn_.exec_pipeline({{sql::cancel_terminate::request_cancel, {execution_id, reason, by}},
                                {sql::work::notify, {}}});
  return stop_result(r ? Result<store::PgResult>(std::move(r->front())) : fail(r.error()));
}

Result<std::optional<ExecutionStore::StopResult>> ExecutionStore::terminate(
    const std::string& execution_id, const std::string& reason, const std::string& by) {
  // The run's lease (if a worker holds it) goes in the second statement; the
  // worker's next write finds no lease.
  auto r = conn_.exec_pipeline({{sql::cancel_terminate::terminate, {execution_id, reason, by}},
                                {sql::cancel_terminate::drop_closed_leases, {}}});
  return stop_result(r ? Result<store::PgResult>(std::move(r->front())) : fail(r.error()));
}

Result<long long> ExecutionStore::count_open(const StopFilter& filter) {
  auto r = conn_.exec(sql::cancel_terminate::count_open, {filter.workflow, filter.status});
  if (!r) return fail(r.error());
  return r->get_int(0, "n");
}

Result<std::map<std::string, long long>> ExecutionStore::request_cancel_where(
    const StopFilter& filter, const std::string& reason, const std::string& by) {
  return in_chunks(conn_, sql::cancel_terminate::request_cancel_where, sql::work::notify, filter,
                   reason, by);
}

Result<std::map<std::string, long long>> ExecutionStore::terminate_where(const StopFilter& filter,
                                                                         const std::string& reason,
                                                                         const std::string& by) {
  return in_chunks(conn_, sql::cancel_terminate::terminate_where,
                   sql::cancel_terminate::drop_closed_leases, filter, reason, by);
}

Result<std::string> ExecutionStore::cancel_reason(const std::string& execution_id) {
  auto r = conn_.exec(sql::cancel_terminate::cancel_reason, {execution_id});
  if (!r) return fail(r.error());
  return r->empty() ? std::string() : r->get(0, "reason");
}

Result<bool> ExecutionStore::finish_cancelled(const Fence& fence, const Json& output,
                                              const std::optional<std::string>& error) {
  auto r = conn_.exec(sql::cancel_terminate::finish_cancelled,
                      {fence.execution_id, fence.lease, output.dump(), error});
  if (!r) return fail(r.error());
  return !r->empty();
}

}  // namespace harvest::engine
