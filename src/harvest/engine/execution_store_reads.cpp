// ExecutionStore: reading executions and their history, the engine's dead
// letters, and retention's deletes.
#include <fmt/format.h>

#include <algorithm>

#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {

namespace {

constexpr const char* kIsoUtc = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'";

}  // namespace

Result<bool> ExecutionStore::exists(const std::string& execution_id) {
  auto r =
      conn_.exec("SELECT 1 FROM harvest_workflow_executions WHERE id = $1::uuid", {execution_id});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<std::optional<ExecutionView>> ExecutionStore::get(const std::string& execution_id) {
  auto r = conn_.exec(
      fmt::format(
          "SELECT e.id, e.workflow_name, e.workflow_id, " HARVEST_SHOWN_STATUS(
              "e") " AS status, e.input::text AS input, e.output::text AS "
                   "output, e.error, e.start_source, e.start_source_ref, e.start_trace::text AS "
                   "start_trace, e.attempt, e.run_no, NOT e.superseded AS current, l.lease_owner, "
                   "to_char(l.lease_expires_at AT TIME ZONE 'UTC', {0}) AS lease_expires, "
                   "to_char(e.created_at AT TIME ZONE 'UTC', {0}) AS created, "
                   "to_char(e.completed_at AT TIME ZONE 'UTC', {0}) AS completed "
                   "FROM harvest_workflow_executions e LEFT JOIN harvest_run_leases l "
                   "ON l.execution_id = e.id WHERE e.id = $1::uuid",
          kIsoUtc),
      {execution_id});
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
  auto ev =
      conn_.exec(fmt::format("SELECT id, op_seq, kind, name, payload::text AS payload, "
                             "to_char(created_at AT TIME ZONE 'UTC', {}) AS recorded "
                             "FROM harvest_workflow_events WHERE execution_id = $1 ORDER BY id",
                             kIsoUtc),
                 {v.id});
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
  // last, after every recorded event. Runs completed before migration 0016
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
    auto runs = conn_.exec(
        "SELECT count(*) AS runs, "
        "(SELECT id::text FROM harvest_workflow_executions WHERE workflow_name = $1 AND "
        "  workflow_id = $2 AND run_no < $3 ORDER BY run_no DESC LIMIT 1) AS previous, "
        "(SELECT id::text FROM harvest_workflow_executions WHERE workflow_name = $1 AND "
        "  workflow_id = $2 AND run_no > $3 ORDER BY run_no LIMIT 1) AS next "
        "FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2",
        {v.workflow_name, *v.workflow_id, std::to_string(v.run_no)});
    if (!runs) return fail(runs.error());
    v.runs = static_cast<int>(runs->get_int(0, "runs"));
    v.previous_run = runs->get_opt(0, "previous");
    v.next_run = runs->get_opt(0, "next");
  }
  // Unread: delivered, and no SignalReceived event of this run names it.
  auto unread = conn_.exec(
      fmt::format(
          "SELECT s.id, s.name, s.payload::text AS payload, "
          "to_char(s.created_at AT TIME ZONE 'UTC', {}) AS received "
          "FROM harvest_signals s WHERE s.execution_id = $1::uuid AND NOT EXISTS ("
          "  SELECT 1 FROM harvest_workflow_events ev WHERE ev.execution_id = s.execution_id "
          "  AND ev.kind = 'SignalReceived' AND (ev.payload->>'signal_id')::bigint = s.id) "
          "ORDER BY s.id LIMIT 100",
          kIsoUtc),
      {v.id});
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
  // filter over every row.
  const bool every_name = !filter.workflow && (filter.workflow_id || filter.workflow_id_prefix);
  const std::string names =
      every_name ? "AND workflow_name = ANY(ARRAY(WITH RECURSIVE names AS ("
                   "  SELECT min(workflow_name) AS n FROM harvest_workflow_executions "
                   "  WHERE workflow_id IS NOT NULL "
                   "  UNION ALL SELECT (SELECT min(workflow_name) FROM "
                   "  harvest_workflow_executions WHERE workflow_id IS NOT NULL AND "
                   "  workflow_name > names.n) FROM names "
                   "  WHERE n IS NOT NULL) SELECT n FROM names WHERE n IS NOT NULL)) "
                 : "";
  // The status as shown ($2), as conditions an index serves: a held run
  // (running) is found from the lease table, which holds only the runs in
  // flight; every other status reads harvest_executions_by_status in
  // creation order (migration 0019), except `completed`, the common one,
  // which walks the creation-time index.
  std::string status;
  if (!filter.status) {
    status = "AND $2::text IS NULL ";
  } else if (*filter.status == "running") {
    status =
        "AND $2::text = 'running' AND status IN ('pending', 'waiting') "
        "AND id IN (SELECT execution_id FROM harvest_run_leases) ";
  } else if (*filter.status == "pending" || *filter.status == "waiting") {
    status = "AND status = $2 AND status <> 'completed' AND NOT " HARVEST_HAS_LEASE(
        "harvest_workflow_executions") " ";
  } else if (*filter.status == "completed") {
    status = "AND status = $2 ";
  } else {
    status = "AND status = $2 AND status <> 'completed' ";
  }
  constexpr const char* kList = R"sql(
    SELECT id, workflow_name, workflow_id, {shown} AS status, start_source, start_source_ref,
      attempt, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
      to_char(created_at AT TIME ZONE 'UTC', {iso}) AS created,
      to_char(completed_at AT TIME ZONE 'UTC', {iso}) AS completed
    FROM harvest_workflow_executions
    WHERE ($1::text IS NULL OR workflow_name = $1) {status}
      AND ($3::text IS NULL OR start_source = $3)
      AND ($7::text IS NULL OR workflow_id = $7)
      AND ($8::text IS NULL OR starts_with(workflow_id, $8))
      AND ($9::text IS NULL OR start_source_ref = $9)
      AND ($10::timestamptz IS NULL OR created_at >= $10::timestamptz)
      AND ($11::timestamptz IS NULL OR created_at < $11::timestamptz)
      {names}
      -- The cursor as a row comparison on (created_at, id), which the
      -- creation-time indexes serve; microseconds are exact.
      AND ($4::bigint IS NULL OR (created_at, id) <
           ('epoch'::timestamptz + $4::bigint * interval '1 microsecond', $5::uuid))
    ORDER BY created_at DESC, id DESC LIMIT $6)sql";
  auto r = conn_.exec(
      fmt::format(kList, fmt::arg("shown", HARVEST_SHOWN_STATUS("harvest_workflow_executions")),
                  fmt::arg("iso", kIsoUtc), fmt::arg("status", status), fmt::arg("names", names)),
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
  auto r = conn_.exec(
      "SELECT count(*) FROM harvest_workflow_executions e WHERE e.status IN ('pending', 'waiting') "
      "AND e.run_after <= now() AND NOT " HARVEST_HAS_LEASE("e"));
  if (!r) return fail(r.error());
  return std::stoll(r->get(0, 0));
}

Status ExecutionStore::overview(RunOverview& into) {
  // Counted by stored status, then the held runs (a lease row each, few)
  // move from pending or waiting to running: one statement, one snapshot,
  // and no lease probe per row.
  auto counts = conn_.exec(R"sql(
    WITH held AS (
      SELECT e.workflow_name, e.status FROM harvest_run_leases l
      JOIN harvest_workflow_executions e ON e.id = l.execution_id
      WHERE e.status IN ('pending', 'waiting'))
    SELECT workflow_name, status, sum(n)::bigint AS n FROM (
      SELECT workflow_name, status, count(*) AS n FROM harvest_workflow_executions GROUP BY 1, 2
      UNION ALL SELECT workflow_name, status, -count(*) FROM held GROUP BY 1, 2
      UNION ALL SELECT workflow_name, 'running', count(*) FROM held GROUP BY 1) c
    GROUP BY 1, 2 HAVING sum(n) > 0)sql");
  if (!counts) return fail(counts.error());
  for (int i = 0; i < counts->rows(); ++i) {
    into.runs.push_back(RunOverview::Count{.workflow = counts->get(i, "workflow_name"),
                                           .status = counts->get(i, "status"),
                                           .count = counts->get_int(i, "n")});
  }
  // Both windows read an index (created_at; completed_at, closed runs).
  auto recent = conn_.exec(
      "SELECT (SELECT count(*) FROM harvest_workflow_executions WHERE created_at > now() - "
      "  $1 * interval '1 second') AS started, "
      "(SELECT count(*) FROM harvest_workflow_executions WHERE completed_at > now() - "
      "  $1 * interval '1 second' AND status IN " HARVEST_CLOSED_STATUSES ") AS completed",
      {std::to_string(into.window.count())});
  if (!recent) return fail(recent.error());
  into.started += recent->get_int(0, "started");
  into.completed += recent->get_int(0, "completed");
  return {};
}

Result<std::vector<MinuteActivity>> ExecutionStore::activity(long long since) {
  // Starts from the creation-time index; outcomes from the closed runs'
  // completion-time index, grouped by minute in one pass each.
  auto r = conn_.exec(R"sql(
    WITH m AS (
      SELECT generate_series(date_trunc('minute', to_timestamp($1::bigint)),
                             date_trunc('minute', now()), interval '1 minute') AS at),
    s AS (
      SELECT date_trunc('minute', created_at) AS at, count(*) AS n
      FROM harvest_workflow_executions
      WHERE created_at >= date_trunc('minute', to_timestamp($1::bigint)) GROUP BY 1),
    c AS (
      SELECT date_trunc('minute', completed_at) AS at,
             count(*) FILTER (WHERE status = 'completed') AS done,
             count(*) FILTER (WHERE status = 'failed') AS failed
      FROM harvest_workflow_executions
      WHERE completed_at >= date_trunc('minute', to_timestamp($1::bigint))
        AND status IN ('completed', 'failed', 'cancelled', 'terminated') GROUP BY 1)
    SELECT extract(epoch FROM m.at)::bigint AS minute, coalesce(s.n, 0) AS started,
           coalesce(c.done, 0) AS completed, coalesce(c.failed, 0) AS failed
    FROM m LEFT JOIN s ON s.at = m.at LEFT JOIN c ON c.at = m.at ORDER BY m.at)sql",
                      {std::to_string(since)});
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
  auto r = conn_.exec(fmt::format(R"sql(
    SELECT execution_id, workflow_name, workflow_id, reason, error, attempts,
      (extract(epoch FROM failed_at) * 1000000)::bigint AS failed_us,
      to_char(failed_at AT TIME ZONE 'UTC', {}) AS failed
    FROM harvest_engine_dead_letters WHERE replayed_at IS NULL
      AND ($2::bigint IS NULL OR (failed_at, execution_id) <
           ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
    ORDER BY failed_at DESC, execution_id DESC LIMIT $1)sql",
                                  kIsoUtc),
                      {std::to_string(limit), cursor_us, cursor_id});
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
  auto marked = conn_.exec(
      "UPDATE harvest_engine_dead_letters SET replayed_at = now() "
      "WHERE execution_id = $1::uuid AND replayed_at IS NULL RETURNING execution_id",
      {execution_id});
  if (!marked) return fail(marked.error());
  if (marked->empty()) {
    return fail(Error::not_found(fmt::format(
        "execution {} is not in the dead letters (or was already replayed)", execution_id)));
  }
  // Recorded steps stay: the replayed run resumes after the last one.
  auto reset = conn_.exec(
      "WITH r AS (UPDATE harvest_workflow_executions SET status = 'pending', attempt = 1, "
      "error = NULL, output = NULL, completed_at = NULL, crash_count = 0, run_after = now(), "
      "updated_at = now() "
      "WHERE id = $1::uuid AND status = 'failed' RETURNING id) "
      "INSERT INTO harvest_workflow_events (execution_id, kind) SELECT id, 'Replayed' FROM r "
      "RETURNING execution_id",
      {execution_id});
  if (!reset) return fail(reset.error());
  if (reset->empty()) {
    return fail(Error::conflict(fmt::format("execution {} is no longer failed", execution_id)));
  }
  return {};
}

Result<long long> ExecutionStore::purge_terminal(const std::optional<std::string>& workflow,
                                                 const std::vector<std::string>& except,
                                                 std::chrono::seconds age) {
  // Events, signals, dead letters and fired batch items go with their
  // execution, in the same statement (no foreign keys: schema v2).
  constexpr const char* kPurge =
      "WITH gone AS (DELETE FROM harvest_workflow_executions WHERE {} AND status "
      "IN " HARVEST_CLOSED_STATUSES
      " AND completed_at < now() - $2 * interval '1 second' "
      // A run holding its start's key stays until the key's window lapses.
      " AND (key_expires_at IS NULL OR key_expires_at <= now()) RETURNING id), "
      "events AS (DELETE FROM harvest_workflow_events WHERE execution_id IN "
      "  (SELECT id FROM gone)), "
      "signals AS (DELETE FROM harvest_signals WHERE execution_id IN (SELECT id FROM gone)), "
      "letters AS (DELETE FROM harvest_engine_dead_letters WHERE execution_id IN "
      "  (SELECT id FROM gone)), "
      "items AS (DELETE FROM harvest_batch_items WHERE fired_execution IN (SELECT id FROM gone)), "
      "leases AS (DELETE FROM harvest_run_leases WHERE execution_id IN (SELECT id FROM gone)) "
      "SELECT count(*) AS purged FROM gone";
  auto r = workflow ? conn_.exec(fmt::format(kPurge, "workflow_name = $1"),
                                 {*workflow, std::to_string(age.count())})
                    : conn_.exec(fmt::format(kPurge, "workflow_name <> ALL($1::text[])"),
                                 {text_array(except), std::to_string(age.count())});
  if (!r) return fail(r.error());
  return r->get_int(0, "purged");
}

Result<long long> ExecutionStore::purge_expired_claims() {
  auto r = conn_.exec("DELETE FROM harvest_start_claims WHERE expires_at <= now()");
  if (!r) return fail(r.error());
  return r->affected();
}

}  // namespace harvest::engine
