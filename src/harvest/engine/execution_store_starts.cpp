// ExecutionStore: creating executions (batched starts with their claims,
// signal-with-start) and staging signals.
#include <fmt/format.h>

#include <map>
#include <set>

#include <harvest/engine/execution_store.hpp>

namespace harvest::engine {

// The text a refused batch's error carries (refuse_collisions).
#define HARVEST_COLLISION_REFUSED "harvest: coordinate collision"

namespace {

bool collision_refused(const Error& e) {
  return e.detail.find(HARVEST_COLLISION_REFUSED) != std::string::npos;
}

// The statements of one round, wrapped in a transaction that is rolled back
// when `dry_run`; returns the offset of the caller's first statement.
size_t wrap(std::vector<store::Statement>& statements, bool dry_run) {
  if (!dry_run) return 0;
  statements.insert(statements.begin(), store::Statement{"BEGIN", {}});
  statements.push_back({"ROLLBACK", {}});
  return 1;
}

// The batch travels as one json parameter, unpacked by json_to_recordset:
// one round trip whatever its size, and no array-literal escaping. A run's
// input is a `json` column, so it is stored as the text slice of the
// parameter it arrived in: PostgreSQL checks its syntax once and builds no
// jsonb from it (migration 0015; docs/performance.md has the measurement). Its
// length goes along as a LIMIT: the planner otherwise guesses 100 rows for a
// set-returning function, and on tables without statistics that guess picked
// hash joins over whole tables (a fresh database started ~20x slower). The
// lookups are scalar subqueries on unique keys for the same reason: each is
// one index probe per item whatever the statistics say (an EXISTS may be
// planned as a hashed subplan, which reads the whole index once per batch).
constexpr const char* kItemColumns =
    "ord int, wf text, wid text, key text, id uuid, input json, source text, ref text, "
    "max_attempts int, trace jsonb, ckey text, fp bigint";

constexpr const char* kKeyColumns = "ord int, wf text, wid text, key text, id uuid, fp bigint";

Json fingerprint_json(const std::optional<int64_t>& fp) {
  return fp ? Json(*fp) : Json(nullptr);
}

// A batch's one parameter. Callers validate every item first; a value that
// still cannot be serialised (a string that is not UTF-8) refuses the batch
// as permanent, so the caller retries it item by item — never an exception.
Result<std::string> dump_batch(const Json& batch) {
  try {
    return batch.dump();
  } catch (const std::exception& e) {
    return fail(Error::bad_request(std::string("a batch item cannot be serialised: ") + e.what()));
  }
}

Json item_json(size_t ord, const NewExecution& e) {
  return Json{{"ord", ord},
              {"wf", e.workflow},
              {"wid", e.workflow_id ? Json(*e.workflow_id) : Json(nullptr)},
              {"key", e.idempotency_key ? Json(*e.idempotency_key) : Json(nullptr)},
              {"id", e.id},
              {"input", e.input},
              {"source", e.source},
              {"ref", e.source_ref ? Json(*e.source_ref) : Json(nullptr)},
              {"max_attempts", std::max(1, e.max_attempts)},
              {"trace", e.trace ? to_json(*e.trace) : Json(nullptr)},
              {"ckey", e.concurrency_key ? Json(*e.concurrency_key) : Json(nullptr)},
              {"fp", fingerprint_json(e.fingerprint)}};
}

// Creates the executions whose key and workflow_id no run holds: one row
// each, carrying its key's claim and the fingerprint of the record the key
// came from (no event: history shows WorkflowStarted from the row); returns
// the ids created. A key still claimed by a v1 claim
// row (harvest_start_claims, migration 0013) is held too. Inserts are ordered
// (by workflow_id then batch position, keyless-id items by key) so that
// concurrent batches take index locks in one order, and the earliest item of
// a workflow_id is the one that creates it.
constexpr const char* kStartBatch =
    "WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t({cols}) LIMIT $3), "
    "inserted AS (INSERT INTO harvest_workflow_executions "
    "  (id, workflow_name, workflow_id, status, input, start_source, start_source_ref, "
    "  max_attempts, start_trace, concurrency_key, idempotency_key, key_expires_at, "
    "  key_fingerprint) "
    "  SELECT id, wf, wid, 'pending', input, source, ref, max_attempts, trace, ckey, key, "
    "  CASE WHEN key IS NOT NULL THEN now() + $2 * interval '1 second' END, "
    "  CASE WHEN key IS NOT NULL THEN fp END FROM items i "
    "  WHERE i.key IS NULL OR (SELECT true FROM harvest_start_claims c "
    "   WHERE c.workflow_name = i.wf AND c.idempotency_key = i.key AND c.expires_at > now()) "
    "   IS NULL "
    "  ORDER BY wf, wid, CASE WHEN wid IS NULL THEN key END, ord "
    "  ON CONFLICT DO NOTHING RETURNING id) "
    "SELECT id::text AS id FROM inserted";

// Runs in the same transaction, with a fresh snapshot: every item's resolved
// execution — its own if it created it, else the run holding its key, else
// the run its workflow_id names — and whether its key is held by a run whose
// window has lapsed (`lapsed`: the key is released and the item tried again).
// `collided`: the item did not create its run, and the live run holding its
// key was recorded from a record with another fingerprint. Only a key hit
// pays for that probe; a run with no fingerprint (older rows, keys not
// derived from a record) never collides.
// With `refuse` ($3), a collided item raises an error, so the batch's
// transaction commits nothing (kCollisionRefused names it); the CASE is
// evaluated per row, so nothing is raised while no item collides.
constexpr const char* kResolveBatch =
    "SELECT r.*, CASE WHEN $3::bool AND r.collided THEN ('" HARVEST_COLLISION_REFUSED
    " at item ' || r.ord)::int END AS refused FROM ("
    "WITH items AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS t({cols}) LIMIT $2), "
    // An item whose own execution now exists created it in this batch (ids
    // are fresh): it resolves to itself, with one probe and no key lookup.
    "own AS (SELECT i.*, (SELECT true FROM harvest_workflow_executions x WHERE x.id = i.id) "
    "  IS NOT NULL AS created FROM items i OFFSET 0) "
    "SELECT i.ord, CASE WHEN i.created THEN i.id ELSE COALESCE("
    "  (SELECT e.id FROM harvest_workflow_executions e WHERE i.key IS NOT NULL "
    "   AND e.workflow_name = i.wf AND e.idempotency_key = i.key AND e.key_expires_at > now()), "
    "  (SELECT c.execution_id FROM harvest_start_claims c WHERE i.key IS NOT NULL "
    "   AND c.workflow_name = i.wf AND c.idempotency_key = i.key AND c.expires_at > now()), "
    "  (SELECT e.id FROM harvest_workflow_executions e WHERE i.wid IS NOT NULL "
    "   AND e.workflow_name = i.wf AND e.workflow_id = i.wid AND NOT e.superseded)) "
    "  END::text AS execution_id, "
    "  (NOT i.created AND i.key IS NOT NULL AND (SELECT true "
    "   FROM harvest_workflow_executions e WHERE e.workflow_name = i.wf "
    "   AND e.idempotency_key = i.key AND e.key_expires_at <= now()) IS NOT NULL) AS lapsed, "
    "  (NOT i.created AND i.key IS NOT NULL AND i.fp IS NOT NULL AND (SELECT e.key_fingerprint "
    "   <> i.fp FROM harvest_workflow_executions e WHERE e.workflow_name = i.wf "
    "   AND e.idempotency_key = i.key AND e.key_expires_at > now())) IS TRUE AS collided "
    "FROM own i) r ORDER BY r.ord";

// Releases keys whose window has lapsed from the runs that hold them, so a
// start can claim them (rare: a key reused after its window).
constexpr const char* kReleaseLapsed =
    "UPDATE harvest_workflow_executions e SET idempotency_key = NULL, key_expires_at = NULL "
    "FROM (SELECT * FROM jsonb_to_recordset($1::jsonb) AS t(wf text, key text) LIMIT $2) k "
    "WHERE e.workflow_name = k.wf AND e.idempotency_key = k.key AND e.key_expires_at <= now()";

// Wakes the workers of other processes when the transaction commits
// (engine/work_signal.hpp).
constexpr const char* kNotify = "SELECT pg_notify('harvest_work', '')";

constexpr const char* kInsertOne =
    "INSERT INTO harvest_workflow_executions "
    "(id, workflow_name, workflow_id, status, input, start_source, start_source_ref, "
    "max_attempts, start_trace, concurrency_key) "
    "VALUES ($1, $2, $3, 'pending', $4::json, $5, $6, $7, $8::jsonb, $9) "
    "ON CONFLICT (workflow_name, workflow_id) WHERE NOT superseded AND workflow_id IS NOT NULL "
    "DO NOTHING RETURNING id";

}  // namespace

Result<std::vector<Result<StoredStart>>> ExecutionStore::start_batch(
    std::span<const NewExecution> items, std::chrono::seconds window, bool notify,
    bool refuse_collisions) {
  auto out = start_batch_round(items, window, notify, refuse_collisions, false);
  if (out || !refuse_collisions || !collision_refused(out.error())) return out;
  // Nothing was committed: find which items collided, committing nothing.
  auto seen = start_batch_round(items, window, false, false, true);
  if (!seen) return fail(seen.error());
  for (auto& s : *seen) {
    if (s && s->collision) {
      s->started = false;
    } else {
      s = StoredStart{.withheld = true};
    }
  }
  return seen;
}

Result<std::vector<Result<StoredStart>>> ExecutionStore::start_batch_round(
    std::span<const NewExecution> items, std::chrono::seconds window, bool notify, bool refuse,
    bool dry_run) {
  // The first item of each (workflow, key) goes to the database; repeats
  // resolve to whatever it resolved to.
  std::map<std::pair<std::string, std::string>, size_t> first_of_key;
  std::vector<size_t> alias(items.size());
  std::vector<size_t> pending;
  for (size_t i = 0; i < items.size(); ++i) {
    alias[i] = i;
    if (items[i].idempotency_key) {
      auto [it, fresh] =
          first_of_key.try_emplace({items[i].workflow, *items[i].idempotency_key}, i);
      if (!fresh) {
        alias[i] = it->second;
        continue;
      }
    }
    pending.push_back(i);
  }
  std::vector<std::optional<std::string>> execution_of(items.size());
  std::vector<bool> collided(items.size(), false);
  std::set<std::string> created;
  // A second pass only for keys held by a run whose window lapsed: it
  // releases them and tries those items again, in one transaction.
  for (int pass = 0; pass < 2 && !pending.empty(); ++pass) {
    Json batch = Json::array();
    Json keys = Json::array();  // the resolve step needs no inputs: a second, small parameter
    Json lapsed_keys = Json::array();
    for (size_t i : pending) {
      batch.push_back(item_json(i, items[i]));
      keys.push_back(
          Json{{"ord", i},
               {"wf", items[i].workflow},
               {"wid", items[i].workflow_id ? Json(*items[i].workflow_id) : Json()},
               {"key", items[i].idempotency_key ? Json(*items[i].idempotency_key) : Json()},
               {"id", items[i].id},
               {"fp", fingerprint_json(items[i].fingerprint)}});
      if (pass > 0) {
        lapsed_keys.push_back(Json{{"wf", items[i].workflow}, {"key", *items[i].idempotency_key}});
      }
    }
    auto param = dump_batch(batch);
    if (!param) return fail(param.error());
    auto keys_param = dump_batch(keys);
    if (!keys_param) return fail(keys_param.error());
    const std::string count = std::to_string(pending.size());
    std::vector<store::Statement> statements;
    if (pass > 0) {
      auto lapsed_param = dump_batch(lapsed_keys);
      if (!lapsed_param) return fail(lapsed_param.error());
      statements.push_back({kReleaseLapsed, {*lapsed_param, count}, true, true});
    }
    const size_t first = statements.size();
    statements.push_back({fmt::format(kStartBatch, fmt::arg("cols", kItemColumns)),
                          {*param, std::to_string(window.count()), count},
                          true,
                          true});
    statements.push_back({fmt::format(kResolveBatch, fmt::arg("cols", kKeyColumns)),
                          {*keys_param, count, refuse ? "true" : "false"},
                          true,
                          true});
    if (notify) statements.push_back({kNotify, {}});
    const size_t at = wrap(statements, dry_run) + first;
    auto results = conn_.exec_pipeline(statements);
    if (!results) return fail(results.error());
    const store::PgResult& inserted = (*results)[at];
    const store::PgResult& resolved = (*results)[at + 1];
    for (int r = 0; r < inserted.rows(); ++r) created.insert(inserted.get(r, 0));
    std::vector<size_t> lapsed;
    for (int r = 0; r < resolved.rows(); ++r) {
      const auto ord = static_cast<size_t>(resolved.get_int(r, "ord"));
      execution_of[ord] = resolved.get_opt(r, "execution_id");
      collided[ord] = resolved.get_bool(r, "collided");
      if (resolved.get_bool(r, "lapsed")) lapsed.push_back(ord);
    }
    pending = std::move(lapsed);
  }
  std::vector<Result<StoredStart>> out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t first = alias[i];
    const auto& id = execution_of[first];
    if (!id) {
      // The run it resolved to was deleted between the two statements
      // (retention): nothing is wrong with the request, so try again.
      out.push_back(fail(Error::transient_error(
          fmt::format("the execution this start resolved to for workflow '{}' vanished; retry",
                      items[i].workflow))));
      continue;
    }
    const bool started = first == i && *id == items[i].id && created.contains(*id);
    // A repeat of a key within the batch collides when the first item did,
    // or when the two came from different records.
    const auto& fp = items[i].fingerprint;
    const auto& first_fp = items[first].fingerprint;
    const bool collision = collided[first] || (fp && first_fp && *fp != *first_fp);
    out.push_back(StoredStart{started, *id, collision});
  }
  return out;
}

Result<std::optional<std::string>> ExecutionStore::insert(const NewExecution& e) {
  std::optional<std::string> trace;
  if (e.trace) trace = to_json(*e.trace).dump();
  auto r = conn_.exec(kInsertOne,
                      {e.id, e.workflow, e.workflow_id, e.input.dump(), e.source, e.source_ref,
                       std::to_string(std::max(1, e.max_attempts)), trace, e.concurrency_key});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{e.id};
}

Result<std::optional<std::string>> ExecutionStore::find(const std::string& workflow,
                                                        const std::string& workflow_id) {
  auto r = conn_.exec(
      "SELECT id FROM harvest_workflow_executions WHERE workflow_name = $1 AND workflow_id = $2 "
      "AND NOT superseded",
      {workflow, workflow_id});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{r->get(0, "id")};
}

namespace {

constexpr const char* kEntityColumns =
    "ord int, wf text, wid text, id uuid, input json, source text, ref text, max_attempts int, "
    "trace jsonb, startable bool, signal text, payload jsonb, key text, reuse bool, ckey text, "
    "fp bigint";

// `i`'s signal key was delivered to some run of its workflow id (the dedupe
// spans the runs of an entity).
#define HARVEST_DELIVERED_BEFORE                                    \
  "(i.key IS NOT NULL AND EXISTS (SELECT 1 FROM harvest_signals s " \
  "JOIN harvest_workflow_executions x ON x.id = s.execution_id "    \
  "WHERE x.workflow_name = i.wf AND x.workflow_id = i.wid AND s.idempotency_key = i.key))"

// Closes the books on entity runs that ended: the current run of a workflow
// id that is completed or failed is superseded when a new message for it may
// start a new run (policy allow_after_close, a valid start input, a signal
// not delivered before). Concurrent writers serialise on the run's row lock.
constexpr const char* kEntitySupersede =
    "WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t({cols}) LIMIT $2), "
    "fresh AS (SELECT DISTINCT i.wf, i.wid FROM items i WHERE i.startable AND i.reuse "
    "  AND NOT " HARVEST_DELIVERED_BEFORE
    ") "
    "UPDATE harvest_workflow_executions e SET superseded = true, updated_at = now() "
    "FROM fresh f WHERE e.workflow_name = f.wf AND e.workflow_id = f.wid AND NOT e.superseded "
    "AND e.status IN " HARVEST_CLOSED_STATUSES " RETURNING e.id";

// Creates the entity runs that do not exist yet (the first startable item of
// each workflow_id decides its input).
constexpr const char* kEntityStart =
    "WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t({cols}) LIMIT $2), "
    "firsts AS (SELECT DISTINCT ON (wf, wid) * FROM items i WHERE startable "
    "  AND NOT " HARVEST_DELIVERED_BEFORE
    " ORDER BY wf, wid, ord), "
    "inserted AS (INSERT INTO harvest_workflow_executions "
    "  (id, workflow_name, workflow_id, status, input, start_source, start_source_ref, "
    "  max_attempts, start_trace, run_no, entity_reuse, concurrency_key) "
    "  SELECT id, wf, wid, 'pending', input, source, ref, max_attempts, trace, "
    "  COALESCE((SELECT max(x.run_no) FROM harvest_workflow_executions x "
    "   WHERE x.workflow_name = f.wf AND x.workflow_id = f.wid), 0) + 1, reuse, ckey FROM firsts f "
    "  ORDER BY wf, wid ON CONFLICT DO NOTHING RETURNING id) "
    "SELECT id::text AS id FROM inserted";

// With a fresh snapshot (the runs exist now, whoever created them): locks
// every target run in id order (the lock serialises signal writers, so signal
// ids follow commit order), stages the new signals of open runs in batch
// order, and bumps each woken run's signal sequence once per staged signal.
constexpr const char* kEntitySignal =
    "WITH items AS (SELECT * FROM json_to_recordset($1::json) AS t({cols}) LIMIT $2), "
    "targets AS (SELECT e.id, e.workflow_name, e.workflow_id, e.status, e.run_no "
    "  FROM harvest_workflow_executions e "
    "  WHERE (e.workflow_name, e.workflow_id) IN (SELECT wf, wid FROM items) AND NOT e.superseded "
    "  ORDER BY e.id FOR NO KEY UPDATE), "
    "staged AS (INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key, "
    "  fingerprint) "
    "  SELECT t.id, i.signal, i.payload, i.key, CASE WHEN i.key IS NOT NULL THEN i.fp END "
    "  FROM items i JOIN targets t "
    "  ON t.workflow_name = i.wf AND t.workflow_id = i.wid "
    "  WHERE t.status NOT IN " HARVEST_CLOSED_STATUSES
    " "
    // An item whose start input is invalid may attach only to a run that it
    // did not precede: created before this batch or by an earlier item.
    "  AND (i.startable OR NOT EXISTS (SELECT 1 FROM items c WHERE c.id = t.id AND c.ord > i.ord)) "
    "  AND NOT " HARVEST_DELIVERED_BEFORE
    " "
    "  ORDER BY i.ord "
    "  ON CONFLICT (execution_id, idempotency_key) DO NOTHING "
    "  RETURNING execution_id, idempotency_key), "
    "woken AS (UPDATE harvest_workflow_executions e SET signal_seq = signal_seq + n.staged, "
    "  run_after = CASE WHEN e.status = 'waiting' THEN now() ELSE e.run_after END "
    "  FROM (SELECT execution_id, count(*) AS staged FROM staged GROUP BY execution_id) n "
    "  WHERE e.id = n.execution_id) "
    // `existed`: the key was delivered before (HARVEST_DELIVERED_BEFORE, read
    // through the lateral `d` so its fingerprint comes with it); `collided`:
    // from a record with another fingerprint.
    // With `refuse` ($3), a collided item raises (as kResolveBatch does).
    "SELECT i.ord, t.id::text AS id, t.status, t.run_no, d.delivered IS NOT NULL AS existed, "
    "  (i.fp IS NOT NULL AND d.fingerprint IS NOT NULL AND d.fingerprint <> i.fp) AS collided, "
    "  CASE WHEN $3::bool AND i.fp IS NOT NULL AND d.fingerprint <> i.fp THEN "
    "('" HARVEST_COLLISION_REFUSED
    " at item ' || i.ord)::int END AS refused, "
    "  (i.key IS NOT NULL AND EXISTS (SELECT 1 FROM staged s "
    "   WHERE s.execution_id = t.id AND s.idempotency_key = i.key)) AS staged, "
    "  (NOT i.startable AND EXISTS (SELECT 1 FROM items c WHERE c.id = t.id AND c.ord > i.ord)) "
    "   AS before_start "
    "FROM items i LEFT JOIN targets t ON t.workflow_name = i.wf AND t.workflow_id = i.wid "
    "LEFT JOIN LATERAL (SELECT true AS delivered, s.fingerprint FROM harvest_signals s "
    "  JOIN harvest_workflow_executions x ON x.id = s.execution_id WHERE i.key IS NOT NULL "
    "  AND x.workflow_name = i.wf AND x.workflow_id = i.wid AND s.idempotency_key = i.key "
    "  LIMIT 1) d ON true "
    "ORDER BY i.ord";

#undef HARVEST_DELIVERED_BEFORE

}  // namespace

Result<std::vector<StoredEntitySignal>> ExecutionStore::signal_with_start_batch(
    std::span<const NewEntitySignal> items, bool notify, bool refuse_collisions) {
  auto out = signal_batch_round(items, notify, refuse_collisions, false);
  if (out || !refuse_collisions || !collision_refused(out.error())) return out;
  auto seen = signal_batch_round(items, false, false, true);
  if (!seen) return fail(seen.error());
  for (auto& s : *seen) {
    if (!s.collision) s = StoredEntitySignal{.withheld = true};
  }
  return seen;
}

Result<std::vector<StoredEntitySignal>> ExecutionStore::signal_batch_round(
    std::span<const NewEntitySignal> items, bool notify, bool refuse, bool dry_run) {
  Json batch = Json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    Json j = item_json(i, items[i].start);
    j["startable"] = items[i].startable;
    j["signal"] = items[i].signal;
    j["payload"] = items[i].payload;
    j["key"] = items[i].signal_key ? Json(*items[i].signal_key) : Json(nullptr);
    j["reuse"] = items[i].reuse_after_close;
    j["fp"] = fingerprint_json(items[i].signal_fingerprint);
    batch.push_back(std::move(j));
  }
  auto dumped = dump_batch(batch);
  if (!dumped) return fail(dumped.error());
  const std::string& param = *dumped;
  const std::string count = std::to_string(items.size());
  std::vector<store::Statement> statements{
      {fmt::format(kEntitySupersede, fmt::arg("cols", kEntityColumns)), {param, count}, true, true},
      {fmt::format(kEntityStart, fmt::arg("cols", kEntityColumns)), {param, count}, true, true},
      {fmt::format(kEntitySignal, fmt::arg("cols", kEntityColumns)),
       {param, count, refuse ? "true" : "false"},
       true,
       true}};
  if (notify) statements.push_back({kNotify, {}});
  const size_t at = wrap(statements, dry_run);
  auto results = conn_.exec_pipeline(statements);
  if (!results) return fail(results.error());
  std::set<std::string> created;
  for (int r = 0; r < (*results)[at + 1].rows(); ++r) {
    created.insert((*results)[at + 1].get(r, 0));
  }
  const store::PgResult& rows = (*results)[at + 2];
  std::vector<StoredEntitySignal> out(items.size());
  // Keyed repeats within one batch: the first staged it, the rest are
  // duplicates even though the row did not exist before the statement.
  std::set<std::pair<std::string, std::string>> seen_keys;
  for (int r = 0; r < rows.rows(); ++r) {
    const size_t i = static_cast<size_t>(rows.get_int(r, "ord"));
    StoredEntitySignal& s = out[i];
    auto id = rows.get_opt(r, "id");
    if (!id || rows.get_bool(r, "before_start")) {
      s.missing = true;
      continue;
    }
    s.execution_id = *id;
    s.run_no = static_cast<int>(rows.get_int(r, "run_no"));
    s.started = *id == items[i].start.id && created.contains(*id);
    const std::string status = rows.get(r, "status");
    const bool existed = rows.get_bool(r, "existed");
    const bool staged = rows.get_bool(r, "staged");
    const auto& key = items[i].signal_key;
    const bool repeat_in_batch = key && !seen_keys.insert({*id, *key}).second;
    if (existed || repeat_in_batch) {
      s.duplicate_signal = true;
      s.collision = existed && rows.get_bool(r, "collided");
    } else if (is_closed_status(status)) {
      s.closed_status = status;
    } else if (key && !staged) {
      s.duplicate_signal = true;  // raced with a concurrent writer of the same key
    }
  }
  return out;
}

Result<std::optional<ExecutionStore::LockedTarget>> ExecutionStore::lock_target(
    const SignalTarget& target) {
  Result<store::PgResult> r = [&]() -> Result<store::PgResult> {
    if (target.execution_id) {
      return conn_.exec(
          "SELECT id, status FROM harvest_workflow_executions WHERE id = $1::uuid "
          "FOR NO KEY UPDATE",
          {target.execution_id});
    }
    return conn_.exec(
        "SELECT id, status FROM harvest_workflow_executions "
        "WHERE workflow_name = $1 AND workflow_id = $2 AND NOT superseded FOR NO KEY UPDATE",
        {target.workflow, target.workflow_id});
  }();
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<LockedTarget>{};
  return std::optional<LockedTarget>{LockedTarget{r->get(0, "id"), r->get(0, "status")}};
}

Result<bool> ExecutionStore::stage_signal(const std::string& execution_id, const std::string& name,
                                          const Json& payload,
                                          const std::optional<std::string>& key) {
  auto r = conn_.exec(
      "WITH s AS (INSERT INTO harvest_signals (execution_id, name, payload, idempotency_key) "
      "VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (execution_id, idempotency_key) DO NOTHING "
      "RETURNING execution_id) "
      "UPDATE harvest_workflow_executions e SET signal_seq = signal_seq + 1, "
      "run_after = CASE WHEN status = 'waiting' THEN now() ELSE run_after END "
      "FROM s WHERE e.id = s.execution_id RETURNING e.id",
      {execution_id, name, payload.dump(), key});
  if (!r) return fail(r.error());
  return !r->empty();
}

std::string ExecutionStore::text_array(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace harvest::engine
