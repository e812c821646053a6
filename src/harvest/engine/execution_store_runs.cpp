// ExecutionStore: what workers do to runs — claim them under a lease, read
// and extend their history, and record their outcome, every write fenced on
// the claim's lease token.
#include <fmt/format.h>

#include <set>

#include <harvest/common/ids.hpp>
#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {

namespace {

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

// The execution columns a claim reads ({e} is the execution row's alias).
#define HARVEST_CLAIM_COLS                                                                        \
  "e.id, e.workflow_name, e.concurrency_key, e.workflow_id, e.input, e.attempt, e.max_attempts, " \
  "e.signal_seq, e.entity_reuse, e.start_trace, e.run_after, e.cancel_requested_at, e.crash_count"

// What a claim returns for each run it took: `n` holds the claimed rows (as
// locked, so the newest version), `l` their leases.
#define HARVEST_CLAIM_SELECT                                                                  \
  "SELECT n.id::text AS id, l.lease_owner, n.workflow_name, n.workflow_id, n.input::text AS " \
  "input, n.attempt, n.max_attempts, n.signal_seq, n.entity_reuse, n.start_trace::text AS "   \
  "start_trace, (extract(epoch FROM n.run_after) * 1000000)::bigint AS run_after_us, "        \
  "n.cancel_requested_at IS NOT NULL AS cancel_requested, {crash} AS crash_count, "           \
  "(extract(epoch FROM now()) * 1000)::bigint AS db_now_ms "

// A fresh claim of the runs CTE `c` locked: each gets a lease row with a
// token of its own ($1/<n>) expiring in $2 ms. The execution row is only
// locked, not written: the lease row is the claim (migration 0016).
#define HARVEST_CLAIM_TAIL                                                                       \
  "n AS (SELECT c.*, row_number() OVER () AS n FROM c), "                                        \
  "l AS (INSERT INTO harvest_run_leases (execution_id, workflow_name, concurrency_key, "         \
  "  lease_owner, lease_expires_at) SELECT id, workflow_name, concurrency_key, $1 || '/' || n, " \
  "  now() + $2 * interval '1 millisecond' FROM n ON CONFLICT DO NOTHING "                       \
  "  RETURNING execution_id, lease_owner) " HARVEST_CLAIM_SELECT                                 \
  "FROM l JOIN n ON n.id = l.execution_id"

// Claims up to $4 due runs of the workflows $3 that nobody holds, oldest
// first, walking the runnable index ({where} adds to the condition).
constexpr const char* kClaim =
    "WITH c AS (SELECT " HARVEST_CLAIM_COLS
    " FROM harvest_workflow_executions e "
    "  WHERE e.workflow_name = ANY($3::text[]) AND e.status IN ('pending', 'waiting') "
    "  AND e.run_after <= now() {where} AND NOT " HARVEST_HAS_LEASE("e")
    " ORDER BY e.run_after LIMIT $4 "
    "  FOR NO KEY UPDATE OF e SKIP LOCKED), " HARVEST_CLAIM_TAIL;

// ENG-19: claims up to $4 due runs of the keyed workflow $3, at most $5
// held per concurrency key (their leases count), oldest first. Claims of
// one keyed workflow serialise on kKeyedLock, taken by the statement before
// in the same transaction, so this statement's snapshot sees every lease a
// concurrent claim inserted.
constexpr const char* kKeyedClaim =
    "WITH busy AS (SELECT concurrency_key, count(*) AS n FROM harvest_run_leases "
    "  WHERE workflow_name = $3 AND concurrency_key IS NOT NULL GROUP BY concurrency_key), "
    "cand AS (SELECT e.id, e.concurrency_key, e.run_after, row_number() OVER (PARTITION BY "
    "  e.concurrency_key ORDER BY e.run_after, e.id) AS rn FROM harvest_workflow_executions e "
    "  WHERE e.workflow_name = $3 AND e.status IN ('pending', 'waiting') AND e.run_after <= now() "
    "  AND NOT " HARVEST_HAS_LEASE("e") "), "
    "pick AS (SELECT cand.id FROM cand LEFT JOIN busy b ON b.concurrency_key = "
    "  cand.concurrency_key WHERE cand.concurrency_key IS NULL OR cand.rn + COALESCE(b.n, 0) <= $5 "
    "  ORDER BY cand.run_after LIMIT $4), "
    "c AS (SELECT " HARVEST_CLAIM_COLS
    " FROM harvest_workflow_executions e WHERE e.id IN (SELECT id FROM pick) "
    "  AND e.status IN ('pending', 'waiting') FOR NO KEY UPDATE OF e SKIP "
    "LOCKED), " HARVEST_CLAIM_TAIL;

constexpr const char* kKeyedLock =
    "SELECT pg_advisory_xact_lock(hashtext('harvest.concurrency'), hashtext($1))";

// Takes over up to $4 leases on runs of the workflows $3 matching {where}
// (on the lease row): a new token ($1/<n>) and expiry, and a crash counted
// on the execution row (ENG-18). Both locks are taken with SKIP LOCKED, so
// a takeover never waits: a lease being renewed, written under (history
// writes hold it FOR KEY SHARE) or ended is skipped, and
// one renewed since this statement's snapshot fails {where} on re-check.
constexpr const char* kTakeover =
    "WITH cand AS (SELECT execution_id FROM harvest_run_leases "
    "  WHERE workflow_name = ANY($3::text[]) AND {where} ORDER BY lease_expires_at LIMIT $4 "
    "  FOR UPDATE SKIP LOCKED), "
    "c AS (SELECT " HARVEST_CLAIM_COLS
    " FROM harvest_workflow_executions e WHERE e.id IN (SELECT execution_id FROM cand) "
    "  AND e.status NOT IN " HARVEST_CLOSED_STATUSES
    " FOR NO KEY UPDATE OF e SKIP LOCKED), "
    "n AS (SELECT c.*, row_number() OVER () AS n FROM c), "
    "l AS (UPDATE harvest_run_leases r SET lease_owner = $1 || '/' || n.n, "
    "  lease_expires_at = now() + $2 * interval '1 millisecond', claimed_at = now() "
    "  FROM n WHERE r.execution_id = n.id RETURNING r.execution_id, r.lease_owner), "
    // crash_count: takeovers since the run last recorded a durable
    // operation. A holder that recorded one since the previous takeover
    // (crash_mark: the newest op_seq then) starts the count again at this
    // one; otherwise it goes up by one (ENG-18).
    "p AS (SELECT l.execution_id, (SELECT max(ev.op_seq) FROM harvest_workflow_events ev "
    "  WHERE ev.execution_id = l.execution_id) AS mark FROM l), "
    "k AS (UPDATE harvest_workflow_executions x SET crash_count = CASE "
    "  WHEN p.mark > x.crash_mark THEN 1 ELSE x.crash_count + 1 END, crash_mark = p.mark, "
    "  updated_at = now() FROM p WHERE x.id = p.execution_id RETURNING x.id, "
    "x.crash_count) " HARVEST_CLAIM_SELECT
    "FROM l JOIN n ON n.id = l.execution_id JOIN k ON k.id = n.id";

#undef HARVEST_CLAIM_COLS
#undef HARVEST_CLAIM_SELECT

}  // namespace

Result<std::vector<ClaimedRun>> ExecutionStore::claim(const std::vector<std::string>& workflows,
                                                      const std::string& owner,
                                                      std::chrono::milliseconds lease, size_t limit,
                                                      const std::optional<std::string>& own_prefix,
                                                      std::optional<long long>* cursor,
                                                      const std::map<std::string, int>& keyed) {
  std::vector<ClaimedRun> out;
  // Tokens "<owner>/<claim>.<kind>/<n>": unique per claim, so two threads of
  // one worker can never both pass the fence for one execution.
  const std::string lease_prefix = owner + "/" + new_uuid().substr(0, 13);
  const std::string all_names = text_array(workflows);
  std::vector<std::string> unkeyed;
  for (const auto& w : workflows) {
    if (!keyed.contains(w)) unkeyed.push_back(w);
  }
  const std::string unkeyed_names = text_array(unkeyed);
  struct Kind {
    std::string sql;
    store::Params params;  // after $1..$4
    bool advances_cursor = false;
    std::optional<std::string> keyed_workflow;  // a kKeyedClaim (its $3)
  };
  auto fresh = [](const std::string& where) {
    return fmt::format(kClaim, fmt::arg("where", where), fmt::arg("crash", "n.crash_count"));
  };
  auto takeover = [](const std::string& where) {
    return fmt::format(kTakeover, fmt::arg("where", where), fmt::arg("crash", "k.crash_count"));
  };
  // Runnable work first (keyed workflows through their own claim); then runs
  // whose worker's lease lapsed; then, for a process with a stable instance
  // id, runs a previous incarnation of it was holding when it died (their
  // lease has not lapsed, but their owner is gone: nobody else will ever
  // renew it). The last two take a lease over from a holder that recorded no
  // outcome: each such claim counts a crash (ENG-18).
  std::vector<Kind> kinds;
  if (!unkeyed.empty()) {
    if (cursor && *cursor) {
      kinds.push_back(Kind{fresh("AND e.run_after >= to_timestamp($5::bigint / 1e6)"),
                           {std::to_string(**cursor)},
                           true});
    }
    kinds.push_back(Kind{fresh(""), {}, true});
  }
  for (const auto& [workflow, max_per_key] : keyed) {
    kinds.push_back(Kind{fmt::format(kKeyedClaim, fmt::arg("crash", "n.crash_count")),
                         {std::to_string(max_per_key)},
                         false,
                         workflow});
  }
  kinds.push_back(Kind{takeover("lease_expires_at < now()"), {}});
  if (own_prefix) {
    kinds.push_back(
        Kind{takeover("starts_with(lease_owner, $5) AND NOT starts_with(lease_owner, $6)"),
             {*own_prefix, owner + "/"}});
  }
  std::optional<long long> latest;
  for (size_t k = 0; k < kinds.size() && out.size() < limit; ++k) {
    const Kind& kind = kinds[k];
    const bool runnable_only = kind.advances_cursor;
    store::Params params{
        lease_prefix + "." + std::to_string(k), ms(lease),
        kind.keyed_workflow ? *kind.keyed_workflow : (runnable_only ? unkeyed_names : all_names),
        std::to_string(limit - out.size())};
    for (const auto& p : kind.params) params.push_back(p);
    std::vector<store::Statement> statements;
    if (kind.keyed_workflow) statements.push_back({kKeyedLock, {*kind.keyed_workflow}});
    statements.push_back({kind.sql, std::move(params), true, !kind.keyed_workflow});
    const auto sent = std::chrono::system_clock::now();
    auto rs = conn_.exec_pipeline(statements);
    // The database's now() was read between sending and answering: the
    // midpoint stands for it on this host's clock (ENG-21).
    const long long host_mid_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            (sent + (std::chrono::system_clock::now() - sent) / 2).time_since_epoch())
            .count();
    auto r = rs ? Result<store::PgResult>(std::move(rs->back())) : fail(rs.error());
    if (!r) {
      if (out.empty()) return fail(r.error());
      break;  // keep what was claimed; their leases are ours either way
    }
    for (int i = 0; i < r->rows(); ++i) {
      if (runnable_only) latest = std::max(latest.value_or(0), r->get_int(i, "run_after_us"));
      ClaimedRun c;
      c.id = r->get(i, "id");
      c.lease = r->get(i, "lease_owner");
      c.workflow_name = r->get(i, "workflow_name");
      c.workflow_id = r->get_opt(i, "workflow_id");
      c.input = Json::parse(r->get(i, "input"));
      c.attempt = static_cast<int>(r->get_int(i, "attempt"));
      c.max_attempts = static_cast<int>(r->get_int(i, "max_attempts"));
      c.signal_seq = r->get_int(i, "signal_seq");
      c.entity_reuse = r->get_bool(i, "entity_reuse");
      c.cancel_requested = r->get_bool(i, "cancel_requested");
      c.crash_count = static_cast<int>(r->get_int(i, "crash_count"));
      c.claimed_at = std::chrono::system_clock::time_point(
          std::chrono::milliseconds(r->get_int(i, "db_now_ms")));
      c.clock_offset = std::chrono::milliseconds(r->get_int(i, "db_now_ms") - host_mid_ms);
      if (auto t = r->get_opt(i, "start_trace")) c.trace = trace_context_from_json(Json::parse(*t));
      out.push_back(std::move(c));
    }
  }
  if (cursor) *cursor = latest ? latest : *cursor;
  if (out.empty()) return out;
  // History in a statement of its own, so it is read after the claims
  // committed: a previous holder can write nothing after that.
  std::vector<std::string> ids;
  for (const auto& c : out) ids.push_back(c.id);
  auto ev = conn_.exec_keyed(
      "SELECT execution_id::text AS execution_id, op_seq, kind, name, payload::text AS payload "
      "FROM harvest_workflow_events WHERE execution_id = ANY($1::uuid[]) AND op_seq IS NOT NULL "
      "ORDER BY execution_id, op_seq",
      {text_array(ids)});
  if (!ev) return fail(ev.error());  // the leases lapse and the runs are claimed again
  std::map<std::string, ClaimedRun*> by_id;
  for (auto& c : out) by_id[c.id] = &c;
  for (int i = 0; i < ev->rows(); ++i) {
    ClaimedRun* c = by_id.at(ev->get(i, "execution_id"));
    c->ops[static_cast<int>(ev->get_int(i, "op_seq"))] =
        RecordedOp{ev->get(i, "kind"), ev->get_opt(i, "name").value_or(""),
                   Json::parse(ev->get_opt(i, "payload").value_or("null"))};
  }
  return out;
}

Result<bool> ExecutionStore::analyze_if_never_analyzed(long long min_rows) {
  // The row count is read directly (stopping at min_rows), not from the
  // cumulative statistics, which a backend may publish only seconds later.
  auto r = conn_.exec(
      "SELECT c.reltuples::bigint AS tuples, "
      "(SELECT count(*) FROM (SELECT 1 FROM harvest_workflow_executions LIMIT $1) l) AS rows "
      "FROM pg_class c WHERE c.oid = 'harvest_workflow_executions'::regclass",
      {std::to_string(min_rows)});
  if (!r) return fail(r.error());
  if (r->empty()) return false;
  if (r->get_int(0, "tuples") >= 0) return true;
  if (r->get_int(0, "rows") < min_rows) return false;
  auto a = conn_.exec_script(
      "ANALYZE harvest_workflow_executions; ANALYZE harvest_workflow_events; "
      "ANALYZE harvest_signals");
  if (!a) return fail(a.error());
  return true;
}

Status ExecutionStore::record_op(const Fence& fence, int op_seq, const RecordedOp& op) {
  // The fence's FOR KEY SHARE holds off a takeover or terminate (each changes
  // the lease row) until this commits: no lease, no event.
  auto r = conn_.exec_keyed(fmt::format("WITH f AS ({}) "
                                        "INSERT INTO harvest_workflow_events "
                                        "(execution_id, op_seq, kind, name, payload) "
                                        "SELECT id, $3, $4, $5, $6::jsonb FROM f RETURNING id",
                                        kLeaseFence),
                            {fence.execution_id, fence.lease, std::to_string(op_seq), op.kind,
                             op.name, op.payload.dump()});
  if (!r) return fail(r.error());  // kConflict: another holder wrote this position
  if (r->empty()) return fail(Error::conflict("the run's lease is held by another worker"));
  return {};
}

Result<std::optional<std::pair<long long, Json>>> ExecutionStore::next_signal(
    const std::string& execution_id, const std::string& name, long long after) {
  auto r = conn_.exec(
      "SELECT id, payload::text AS payload FROM harvest_signals "
      "WHERE execution_id = $1 AND name = $2 AND id > $3 ORDER BY id LIMIT 1",
      {execution_id, name, std::to_string(after)});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::pair<long long, Json>>{};
  return std::optional<std::pair<long long, Json>>{
      std::make_pair(r->get_int(0, "id"), Json::parse(r->get(0, "payload")))};
}

// The statements below run in the completion's transaction and act only on
// a run completed by it (completed_at = now(), the transaction's start): an
// entity run (entity_reuse) that leaves signals unread is superseded by its
// next run, which takes those signals in their order and the same input.
constexpr const char* kUnread =
    "SELECT s.id FROM harvest_signals s WHERE s.execution_id = d.id AND NOT EXISTS ("
    "  SELECT 1 FROM harvest_workflow_events ev WHERE ev.execution_id = d.id "
    "  AND ev.kind = 'SignalReceived' AND (ev.payload->>'signal_id')::bigint = s.id)";

constexpr const char* kCarrySupersede =
    "UPDATE harvest_workflow_executions d SET superseded = true "
    "WHERE d.id = $1 AND d.status = 'completed' AND d.completed_at = now() AND d.entity_reuse "
    "AND NOT d.superseded AND EXISTS ({unread}) RETURNING d.id";

constexpr const char* kCarryNextRun =
    "WITH d AS (SELECT * FROM harvest_workflow_executions WHERE id = $1 AND superseded "
    "  AND completed_at = now()), "
    "n AS (INSERT INTO harvest_workflow_executions (id, workflow_name, workflow_id, status, "
    "  input, start_source, start_source_ref, start_trace, max_attempts, run_no, entity_reuse, "
    "  concurrency_key) "
    "  SELECT gen_random_uuid(), d.workflow_name, d.workflow_id, 'pending', d.input, "
    "  d.start_source, d.start_source_ref, d.start_trace, d.max_attempts, d.run_no + 1, true, "
    "  d.concurrency_key "
    "  FROM d "
    "  RETURNING id, workflow_name, start_source, start_source_ref), "
    "moved AS (UPDATE harvest_signals s SET execution_id = n.id FROM n, d "
    "  WHERE s.id IN ({unread}) RETURNING s.id) "
    "INSERT INTO harvest_workflow_events (execution_id, kind, name, payload) "
    "SELECT n.id, 'WorkflowStarted', n.workflow_name, jsonb_build_object('start_source', "
    "  n.start_source, 'start_source_ref', n.start_source_ref, 'carried_signals', "
    "  (SELECT count(*) FROM moved), 'previous_run', $1::text) FROM n "
    "RETURNING execution_id::text, (payload->>'carried_signals')::int AS carried";

Result<CompletedRun> ExecutionStore::complete(const Fence& fence, const Json& output,
                                              bool entity_reuse) {
  const std::string unread = kUnread;
  std::vector<store::Statement> statements{
      {"WITH " HARVEST_HELD_CTES
       ", done AS (UPDATE harvest_workflow_executions SET status = 'completed', "
       "output = $3::jsonb, completed_at = now(), updated_at = now() FROM held "
       "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES " RETURNING id) "
       // The row is the completion: history shows WorkflowCompleted from
       // its status, output and completed_at (no event row, migration 0016).
       "SELECT id FROM done",
       {fence.execution_id, fence.lease, output.dump()},
       true,
       true}};
  // Only an entity run can hand signals on: a plain completion stays one
  // statement.
  if (entity_reuse) {
    statements.push_back({fmt::format(kCarrySupersede, fmt::arg("unread", unread)),
                          {fence.execution_id},
                          true,
                          true});
    statements.push_back(
        {fmt::format(kCarryNextRun, fmt::arg("unread", unread)), {fence.execution_id}, true, true});
  }
  auto r = conn_.exec_pipeline(statements);
  if (!r) return fail(r.error());
  CompletedRun out{.completed = !(*r)[0].empty()};
  if (entity_reuse && !(*r)[2].empty()) {
    out.next_run = (*r)[2].get(0, 0);
    out.carried_signals = static_cast<int>((*r)[2].get_int(0, "carried"));
  }
  return out;
}

// The batch travels as jsonb (see execution_store_starts.cpp), its length
// as a LIMIT for the planner. Payloads and outputs travel as text so a JSON
// null stays a jsonb null rather than becoming SQL NULL.
constexpr const char* kLockBatch =
    "SELECT id FROM harvest_workflow_executions WHERE id = ANY($1::uuid[]) ORDER BY id "
    "FOR NO KEY UPDATE";

// The execution rows are locked (kLockBatch): no takeover or terminate can
// change a lease before this transaction ends.
constexpr const char* kRecordBatch =
    "WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS "
    "  t(id uuid, lease text, seq int, kind text, name text, payload text) LIMIT $2) "
    "INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload) "
    "SELECT i.id, i.seq, i.kind, i.name, i.payload::jsonb FROM items i "
    "WHERE (SELECT l.lease_owner FROM harvest_run_leases l WHERE l.execution_id = i.id) = "
    "  i.lease "
    "ORDER BY i.id ON CONFLICT (execution_id, op_seq) DO NOTHING RETURNING execution_id::text";

// Ends the leases the items' tokens still hold and completes those runs.
// The leases are reached by primary key ($3, the items' ids): no plan reads
// the whole lease table. Renewals skip a lease being deleted, so no order is
// needed against them.
constexpr const char* kCompleteBatch =
    "WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS "
    "  t(id uuid, lease text, output text) LIMIT $2), "
    "held AS (DELETE FROM harvest_run_leases l WHERE l.execution_id = ANY($3::uuid[]) "
    "  AND (l.execution_id, l.lease_owner) IN (SELECT id, lease FROM items) "
    "  RETURNING l.execution_id), "
    "done AS (UPDATE harvest_workflow_executions e SET status = 'completed', "
    "  output = i.output::jsonb, completed_at = now(), updated_at = now() FROM items i, held h "
    "  WHERE e.id = i.id AND h.execution_id = i.id AND e.status NOT IN " HARVEST_CLOSED_STATUSES
    "  RETURNING e.id) "
    "SELECT id::text FROM done";

Result<std::vector<bool>> ExecutionStore::write_batch(std::span<const RunWrite> writes) {
  std::vector<bool> out(writes.size(), false);
  if (writes.empty()) return out;
  std::vector<std::string> ids;
  Json records = Json::array();
  Json completions = Json::array();
  for (const auto& w : writes) {
    ids.push_back(w.fence.execution_id);
    if (w.op) {
      records.push_back({{"id", w.fence.execution_id},
                         {"lease", w.fence.lease},
                         {"seq", w.op_seq},
                         {"kind", w.op->kind},
                         {"name", w.op->name},
                         {"payload", w.op->payload.dump()}});
    } else {
      completions.push_back(
          {{"id", w.fence.execution_id}, {"lease", w.fence.lease}, {"output", w.output.dump()}});
    }
  }
  std::vector<std::string> completing;
  for (const auto& w : writes) {
    if (!w.op) completing.push_back(w.fence.execution_id);
  }
  std::vector<store::Statement> statements{{kLockBatch, {text_array(ids)}, true, true}};
  const size_t record_at = statements.size();
  if (!records.empty()) {
    statements.push_back(
        {kRecordBatch, {records.dump(), std::to_string(records.size())}, true, true});
  }
  const size_t complete_at = statements.size();
  if (!completions.empty()) {
    statements.push_back(
        {kCompleteBatch,
         {completions.dump(), std::to_string(completions.size()), text_array(completing)},
         true,
         true});
  }
  auto r = conn_.exec_pipeline(statements);
  if (!r) return fail(r.error());
  std::set<std::string> recorded;
  std::set<std::string> completed;
  if (!records.empty()) {
    for (int i = 0; i < (*r)[record_at].rows(); ++i) recorded.insert((*r)[record_at].get(i, 0));
  }
  if (!completions.empty()) {
    for (int i = 0; i < (*r)[complete_at].rows(); ++i) {
      completed.insert((*r)[complete_at].get(i, 0));
    }
  }
  for (size_t i = 0; i < writes.size(); ++i) {
    out[i] = (writes[i].op ? recorded : completed).contains(writes[i].fence.execution_id);
  }
  return out;
}

Result<bool> ExecutionStore::retry_later(const Fence& fence, const std::string& error,
                                         std::chrono::milliseconds backoff, int attempt) {
  auto r =
      conn_.exec("WITH " HARVEST_HELD_CTES
                 ", retry AS (UPDATE harvest_workflow_executions SET status = 'pending', "
                 "attempt = attempt + 1, error = $3, crash_count = 0, "
                 "run_after = now() + $4 * interval '1 millisecond', updated_at = now() FROM held "
                 "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES
                 " RETURNING id) "
                 "INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
                 "SELECT id, 'AttemptFailed', jsonb_build_object('attempt', $5::int, "
                 "'error', $3::text) FROM retry RETURNING execution_id",
                 {fence.execution_id, fence.lease, error, ms(backoff), std::to_string(attempt)});
  if (!r) return fail(r.error());
  return !r->empty();
}

namespace {

// Fails a fenced run into the engine's dead letters with `reason` ($4).
Result<bool> fail_into_dead_letters(store::Connection& conn, const Fence& fence,
                                    const std::string& error, const char* reason) {
  auto r = conn.exec(
      fmt::format("WITH " HARVEST_HELD_CTES
                  ", failed AS (UPDATE harvest_workflow_executions SET status = 'failed', "
                  "error = $3, completed_at = now(), updated_at = now() FROM held "
                  "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES
                  " RETURNING id, workflow_name, workflow_id, attempt), "
                  "event AS (INSERT INTO harvest_workflow_events (execution_id, kind, payload) "
                  "SELECT id, 'WorkflowFailed', jsonb_build_object('error', $3::text, 'reason', "
                  "$4::text) FROM failed) "
                  // ENG-14: the run lands in the engine's dead letters.
                  "INSERT INTO harvest_engine_dead_letters "
                  "(execution_id, workflow_name, workflow_id, error, attempts, reason) "
                  "SELECT id, workflow_name, workflow_id, $3, attempt, $4 FROM failed "
                  "ON CONFLICT (execution_id) DO UPDATE SET error = EXCLUDED.error, "
                  "attempts = EXCLUDED.attempts, reason = EXCLUDED.reason, failed_at = now(), "
                  "replayed_at = NULL "
                  "RETURNING execution_id"),
      {fence.execution_id, fence.lease, error, reason});
  if (!r) return fail(r.error());
  return !r->empty();
}

}  // namespace

Result<bool> ExecutionStore::fail_run(const Fence& fence, const std::string& error) {
  return fail_into_dead_letters(conn_, fence, error, "failed");
}

Result<bool> ExecutionStore::fail_crashed(const Fence& fence, const std::string& error) {
  return fail_into_dead_letters(conn_, fence, error, "crashed_worker");
}

Result<bool> ExecutionStore::suspend(const Fence& fence, long long signal_seq_seen,
                                     long long until_ms) {
  // A signal staged after the run read its history bumped signal_seq: stay
  // runnable instead of sleeping through it.
  auto r = conn_.exec(
      "WITH " HARVEST_HELD_CTES
      "UPDATE harvest_workflow_executions SET status = 'waiting', crash_count = 0, "
      "updated_at = now(), run_after = CASE WHEN signal_seq > $3 THEN now() "
      "ELSE to_timestamp($4::double precision / 1000) END FROM held "
      "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES " RETURNING id",
      {fence.execution_id, fence.lease, std::to_string(signal_seq_seen), std::to_string(until_ms)});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<bool> ExecutionStore::release(const Fence& fence, std::chrono::milliseconds delay) {
  auto r = conn_.exec("WITH " HARVEST_HELD_CTES
                      "UPDATE harvest_workflow_executions SET status = 'pending', "
                      "run_after = now() + $3 * interval '1 millisecond' FROM held "
                      "WHERE id = held.held_id AND status NOT IN " HARVEST_CLOSED_STATUSES
                      " RETURNING id",
                      {fence.execution_id, fence.lease, ms(delay)});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<std::vector<std::string>> ExecutionStore::renew_leases(
    const std::vector<std::string>& tokens, std::chrono::milliseconds lease) {
  std::vector<std::string> cancelled;
  if (tokens.empty()) return cancelled;
  auto r = conn_.exec(
      // Only the lease rows change. A lease locked by another transaction is
      // skipped: it is being ended (an outcome, a terminate) or taken over,
      // and needs no renewal; history writes lock it FOR KEY SHARE, which a
      // renewal does not wait for. So a renewal never waits and never
      // deadlocks.
      "WITH l AS (SELECT execution_id FROM harvest_run_leases WHERE lease_owner = ANY($1::text[]) "
      "FOR NO KEY UPDATE SKIP LOCKED) "
      "UPDATE harvest_run_leases r SET lease_expires_at = now() + $2 * interval "
      "'1 millisecond' FROM l WHERE r.execution_id = l.execution_id "
      "RETURNING r.lease_owner, (SELECT e.cancel_requested_at IS NOT NULL FROM "
      "harvest_workflow_executions e WHERE e.id = r.execution_id) AS cancel_requested",
      {text_array(tokens), ms(lease)});
  if (!r) return fail(r.error());
  for (int i = 0; i < r->rows(); ++i) {
    if (r->get_bool(i, "cancel_requested")) cancelled.push_back(r->get(i, "lease_owner"));
  }
  return cancelled;
}

}  // namespace harvest::engine
