// ExecutionStore: creating executions (batched starts with their claims,
// signal-with-start) and staging signals.
#include <fmt/format.h>

#include <map>
#include <set>
#include <string_view>

#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/starts.hpp>
#include <harvest/engine/sql/work.hpp>

namespace harvest::engine {

namespace {

// The text a refused batch's error carries (refuse_collisions). The SQL writes
// it as a literal (sql/starts/resolve_batch.sql and entity_signal.sql raise
// "harvest: coordinate collision at item <n>"): keep the three the same.
constexpr std::string_view kCollisionRefused = "harvest: coordinate collision";

bool collision_refused(const Error& e) {
  return e.detail.find(kCollisionRefused) != std::string::npos;
}

// The statements of one round, wrapped in a transaction that is rolled back
// when `dry_run`; returns the offset of the caller's first statement. BEGIN
// and ROLLBACK stay literals here: transaction control, not statements of
// sql/.
size_t wrap(std::vector<store::Statement>& statements, bool dry_run) {
  if (!dry_run) return 0;
  statements.insert(statements.begin(), store::Statement{"BEGIN", {}});
  statements.push_back({"ROLLBACK", {}});
  return 1;
}

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

// The batch travels as one json parameter, unpacked by json_to_recordset (the
// column lists are in the statements of sql/starts/, and match the objects
// built here): one round trip whatever its size, and no array-literal escaping.
// A run's input is a `json` column, so it is stored as the text slice of the
// parameter it arrived in: PostgreSQL checks its syntax once and builds no
// jsonb from it (migration engine_0015; docs/performance.md has the measurement). Its
// length goes along as a LIMIT: the planner otherwise guesses 100 rows for a
// set-returning function, and on tables without statistics that guess picked
// hash joins over whole tables (a fresh database started ~20x slower). The
// lookups are scalar subqueries on unique keys for the same reason: each is one
// index probe per item whatever the statistics say (an EXISTS may be planned as
// a hashed subplan, which reads the whole index once per batch).
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
      statements.push_back(
          {sql::starts::release_lapsed, {*lapsed_param, count}, store::Plan::kKeyed});
    }
    const size_t first = statements.size();
    statements.push_back({sql::starts::start_batch,
                          {*param, std::to_string(window.count()), count},
                          store::Plan::kKeyed});
    statements.push_back({sql::starts::resolve_batch,
                          {*keys_param, count, refuse ? "true" : "false"},
                          store::Plan::kKeyed});
    if (notify) statements.push_back({sql::work::notify, {}});
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
  auto r = conn_.exec(sql::starts::insert_one,
                      {e.id, e.workflow, e.workflow_id, e.input.dump(), e.source, e.source_ref,
                       std::to_string(std::max(1, e.max_attempts)), trace, e.concurrency_key});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{e.id};
}

Result<std::optional<std::string>> ExecutionStore::find(const std::string& workflow,
                                                        const std::string& workflow_id) {
  auto r = conn_.exec(sql::starts::find, {workflow, workflow_id});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::string>{};
  return std::optional<std::string>{r->get(0, "id")};
}

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
  // The items' keys are the columns of sql/fragments/starts_entity_columns.sql.
  std::vector<store::Statement> statements{
      {sql::starts::entity_supersede, {param, count}, store::Plan::kKeyed},
      {sql::starts::entity_start, {param, count}, store::Plan::kKeyed},
      {sql::starts::entity_signal, {param, count, refuse ? "true" : "false"}, store::Plan::kKeyed}};
  if (notify) statements.push_back({sql::work::notify, {}});
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
      return conn_.exec(sql::starts::lock_target_by_id, {target.execution_id});
    }
    return conn_.exec(sql::starts::lock_target_by_workflow_id,
                      {target.workflow, target.workflow_id});
  }();
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<LockedTarget>{};
  return std::optional<LockedTarget>{LockedTarget{r->get(0, "id"), r->get(0, "status")}};
}

Result<bool> ExecutionStore::stage_signal(const std::string& execution_id, const std::string& name,
                                          const Json& payload,
                                          const std::optional<std::string>& key) {
  auto r = conn_.exec(sql::starts::stage_signal, {execution_id, name, payload.dump(), key});
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
