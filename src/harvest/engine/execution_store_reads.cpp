// ExecutionStore: reading executions and their history, the engine's dead
// letters, and retention's deletes.
#include <fmt/format.h>

#include <algorithm>

#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/reads.hpp>

namespace harvest::engine {

Result<bool> ExecutionStore::exists(const std::string& execution_id) {
  auto r = conn_.exec(sql::reads::exists, {execution_id});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<std::optional<ExecutionView>> ExecutionStore::get(const std::string& execution_id) {
  auto r = conn_.exec(sql::reads::execution, {execution_id});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<ExecutionView>{};
  ExecutionView v;
  v.id = r->get(0, "id");
  v.workflow_name = r->get(0, "workflow_name");
  v.workflow_id = r->get_opt(0, "workflow_id");
  v.status = r->get(0, "status");
  v.input = Json::parse(r->get(0, "input"));
  if (auto o = r->get_opt(0, "output")) v.output = Json::parse(*o);
  v.error = r->get_opt(0, "error");
  v.start_source = r->get(0, "start_source");
  v.start_source_ref = r->get_opt(0, "start_source_ref");
  if (auto t = r->get_opt(0, "start_trace"))
    v.start_trace = trace_context_from_json(Json::parse(*t));
  v.attempt = static_cast<int>(r->get_int(0, "attempt"));
  v.run_no = static_cast<int>(r->get_int(0, "run_no"));
  v.current = r->get_bool(0, "current");
  // A lease is shown while it is held (an expired one is free to take).
  if (v.status == "running") {
    v.lease_owner = r->get_opt(0, "lease_owner");
    v.lease_expires_at = r->get_opt(0, "lease_expires");
  }
  v.created_at = r->get(0, "created");
  v.completed_at = r->get_opt(0, "completed");
  auto ev = conn_.exec(sql::reads::history, {v.id});
  if (!ev) return fail(ev.error());
  for (int i = 0; i < ev->rows(); ++i) {
    HistoryEvent h;
    h.id = ev->get_int(i, "id");
    if (!ev->is_null(i, "op_seq")) h.op_seq = static_cast<int>(ev->get_int(i, "op_seq"));
    h.kind = ev->get(i, "kind");
    h.name = ev->get_opt(i, "name");
    h.recorded_at = ev->get_opt(i, "recorded");
    if (auto p = ev->get_opt(i, "payload")) {
      h.payload = Json::parse(*p);
    } else if (h.kind == "WorkflowCompleted") {
      h.payload = v.output;  // stored once, on the row
    }
    v.history.push_back(std::move(h));
  }
  // A completion writes no event row either: the row is the completion, shown
  // last, after every recorded event. Runs completed before migration engine_0016
  // have one (with the output on the row, since 0011).
  if (v.status == "completed" &&
      std::none_of(v.history.begin(), v.history.end(),
                   [](const auto& h) { return h.kind == "WorkflowCompleted"; })) {
    HistoryEvent h{.id = v.history.empty() ? 1 : v.history.back().id + 1,
                   .op_seq = std::nullopt,
                   .kind = "WorkflowCompleted",
                   .name = std::nullopt,
                   .payload = v.output,
                   .recorded_at = v.completed_at};
    v.history.push_back(std::move(h));
  }
  // A start writes no event row: the row is the start. Runs created before
  // schema v2 (and an entity's carried-over run) still have one.
  const bool started_row = std::any_of(v.history.begin(), v.history.end(),
                                       [](const auto& h) { return h.kind == "WorkflowStarted"; });
  if (!started_row) {
    HistoryEvent h{.id = 0,
                   .op_seq = std::nullopt,
                   .kind = "WorkflowStarted",
                   .name = v.workflow_name,
                   .payload = Json::object(),
                   .recorded_at = v.created_at};
    h.payload["start_source"] = v.start_source;
    h.payload["start_source_ref"] = v.start_source_ref ? Json(*v.start_source_ref) : Json(nullptr);
    if (auto t = r->get_opt(0, "start_trace")) h.payload["trace"] = Json::parse(*t);
    v.history.insert(v.history.begin(), std::move(h));
  }
  if (v.workflow_id) {
    auto runs = conn_.exec(sql::reads::run_chain,
                           {v.workflow_name, *v.workflow_id, std::to_string(v.run_no)});
    if (!runs) return fail(runs.error());
    v.runs = static_cast<int>(runs->get_int(0, "runs"));
    v.previous_run = runs->get_opt(0, "previous");
    v.next_run = runs->get_opt(0, "next");
  }
  // Unread: delivered, and no SignalReceived event of this run names it.
  auto unread = conn_.exec(sql::reads::unread_signals, {v.id});
  if (!unread) return fail(unread.error());
  for (int i = 0; i < unread->rows(); ++i) {
    v.unread_signals.push_back(UnreadSignal{.id = unread->get_int(i, "id"),
                                            .name = unread->get(i, "name"),
                                            .payload = Json::parse(unread->get(i, "payload")),
                                            .received_at = unread->get(i, "received")});
  }
  return std::optional<ExecutionView>{std::move(v)};
}

Result<std::vector<ListedExecution>> ExecutionStore::list(
    const ExecutionFilter& filter, const std::optional<std::string>& cursor_us,
    const std::optional<std::string>& cursor_id, size_t limit) {
  // A workflow id (or prefix) without a workflow name: the runs index leads
  // with the name (and holds only named runs), so the statement names every
  // workflow that has a named run — read by a loose scan of that index, one
  // probe per name — and the id is then an index condition instead of a
  // filter over every row (the *_by_id statements).
  const bool every_name = !filter.workflow && (filter.workflow_id || filter.workflow_id_prefix);
  auto pick = [every_name](std::string_view named, std::string_view by_id) {
    return every_name ? by_id : named;
  };
  // The status as shown ($2), as conditions an index serves: a held run
  // (running) is found from the lease table, which holds only the runs in
  // flight; every other status reads harvest_executions_by_status in
  // creation order (migration engine_0019), except `completed`, the common one,
  // which walks the creation-time index.
  std::string_view statement;
  if (!filter.status) {
    statement = pick(sql::reads::list_all, sql::reads::list_all_by_id);
  } else if (*filter.status == "running") {
    statement = pick(sql::reads::list_running, sql::reads::list_running_by_id);
  } else if (*filter.status == "pending" || *filter.status == "waiting") {
    statement = pick(sql::reads::list_unheld, sql::reads::list_unheld_by_id);
  } else if (*filter.status == "completed") {
    statement = pick(sql::reads::list_completed, sql::reads::list_completed_by_id);
  } else {
    statement = pick(sql::reads::list_status, sql::reads::list_status_by_id);
  }
  auto r = conn_.exec(statement,
                      {filter.workflow, filter.status, filter.start_source, cursor_us, cursor_id,
                       std::to_string(limit), filter.workflow_id, filter.workflow_id_prefix,
                       filter.start_source_ref, filter.since, filter.until});
  if (!r) return fail(r.error());
  std::vector<ListedExecution> out;
  for (int i = 0; i < r->rows(); ++i) {
    ListedExecution l;
    l.created_us = r->get_int(i, "created_us");
    ExecutionSummary& e = l.summary;
    e.id = r->get(i, "id");
    e.workflow_name = r->get(i, "workflow_name");
    e.workflow_id = r->get_opt(i, "workflow_id");
    e.status = r->get(i, "status");
    e.start_source = r->get(i, "start_source");
    e.start_source_ref = r->get_opt(i, "start_source_ref");
    e.attempt = static_cast<int>(r->get_int(i, "attempt"));
    e.created_at = r->get(i, "created");
    e.completed_at = r->get_opt(i, "completed");
    out.push_back(std::move(l));
  }
  return out;
}

Result<long long> ExecutionStore::runnable_count() {
  auto r = conn_.exec(sql::reads::runnable_count);
  if (!r) return fail(r.error());
  return std::stoll(r->get(0, 0));
}

Status ExecutionStore::overview(RunOverview& into) {
  auto counts = conn_.exec(sql::reads::overview_counts);
  if (!counts) return fail(counts.error());
  for (int i = 0; i < counts->rows(); ++i) {
    into.runs.push_back(RunOverview::Count{.workflow = counts->get(i, "workflow_name"),
                                           .status = counts->get(i, "status"),
                                           .count = counts->get_int(i, "n")});
  }
  auto recent = conn_.exec(sql::reads::overview_recent, {std::to_string(into.window.count())});
  if (!recent) return fail(recent.error());
  into.started += recent->get_int(0, "started");
  into.completed += recent->get_int(0, "completed");
  return {};
}

Result<std::vector<MinuteActivity>> ExecutionStore::activity(long long since) {
  auto r = conn_.exec(sql::reads::activity, {std::to_string(since)});
  if (!r) return fail(r.error());
  std::vector<MinuteActivity> out;
  for (int i = 0; i < r->rows(); ++i) {
    out.push_back(MinuteActivity{.minute = r->get_int(i, "minute"),
                                 .started = r->get_int(i, "started"),
                                 .completed = r->get_int(i, "completed"),
                                 .failed = r->get_int(i, "failed")});
  }
  return out;
}

Result<std::vector<std::pair<long long, EngineDeadLetter>>> ExecutionStore::dead_letters(
    size_t limit, const std::optional<std::string>& cursor_us,
    const std::optional<std::string>& cursor_id) {
  auto r = conn_.exec(sql::reads::dead_letters, {std::to_string(limit), cursor_us, cursor_id});
  if (!r) return fail(r.error());
  std::vector<std::pair<long long, EngineDeadLetter>> out;
  for (int i = 0; i < r->rows(); ++i) {
    out.emplace_back(r->get_int(i, "failed_us"),
                     EngineDeadLetter{.execution_id = r->get(i, "execution_id"),
                                      .workflow_name = r->get(i, "workflow_name"),
                                      .workflow_id = r->get_opt(i, "workflow_id"),
                                      .reason = r->get(i, "reason"),
                                      .error = r->get(i, "error"),
                                      .attempts = static_cast<int>(r->get_int(i, "attempts")),
                                      .failed_at = r->get(i, "failed")});
  }
  return out;
}

Status ExecutionStore::replay_dead_letter(const std::string& execution_id) {
  auto marked = conn_.exec(sql::reads::replay_mark, {execution_id});
  if (!marked) return fail(marked.error());
  if (marked->empty()) {
    return fail(Error::not_found(fmt::format(
        "execution {} is not in the dead letters (or was already replayed)", execution_id)));
  }
  auto reset = conn_.exec(sql::reads::replay_reset, {execution_id});
  if (!reset) return fail(reset.error());
  if (reset->empty()) {
    return fail(Error::conflict(fmt::format("execution {} is no longer failed", execution_id)));
  }
  return {};
}

Result<long long> ExecutionStore::purge_terminal(const std::optional<std::string>& workflow,
                                                 const std::vector<std::string>& except,
                                                 std::chrono::seconds age) {
  // Events, signals, dead letters, fired batch items and leases go with their
  // execution, in the same statement (no foreign keys: schema v2).
  auto r =
      workflow
          ? conn_.exec(sql::reads::purge_workflow, {*workflow, std::to_string(age.count())})
          : conn_.exec(sql::reads::purge_except, {text_array(except), std::to_string(age.count())});
  if (!r) return fail(r.error());
  return r->get_int(0, "purged");
}

Result<long long> ExecutionStore::purge_expired_claims() {
  auto r = conn_.exec(sql::reads::purge_expired_claims);
  if (!r) return fail(r.error());
  return r->affected();
}

}  // namespace harvest::engine
