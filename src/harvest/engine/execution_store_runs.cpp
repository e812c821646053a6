// ExecutionStore: what workers do to runs — claim them under a lease, read
// and extend their history, and record their outcome, every write fenced on
// the claim's lease token.
#include <set>

#include <harvest/common/ids.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/runs.hpp>

namespace harvest::engine {

namespace {

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count());
}

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
    std::string_view sql;
    store::Params params;  // after $1..$4
    bool advances_cursor = false;
    std::optional<std::string> keyed_workflow;  // a sql::runs::keyed_claim (its $3)
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
      kinds.push_back(Kind{sql::runs::claim_from_cursor, {std::to_string(**cursor)}, true});
    }
    kinds.push_back(Kind{sql::runs::claim, {}, true});
  }
  for (const auto& [workflow, max_per_key] : keyed) {
    kinds.push_back(Kind{sql::runs::keyed_claim, {std::to_string(max_per_key)}, false, workflow});
  }
  kinds.push_back(Kind{sql::runs::take_over_lapsed, {}});
  if (own_prefix) {
    kinds.push_back(Kind{sql::runs::take_over_orphaned, {*own_prefix, owner + "/"}});
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
    if (kind.keyed_workflow) statements.push_back({sql::runs::keyed_lock, {*kind.keyed_workflow}});
    statements.push_back({kind.sql, std::move(params),
                          kind.keyed_workflow ? store::Plan::kPrepared : store::Plan::kKeyed});
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
  auto ev = conn_.exec_keyed(sql::runs::claimed_history, {text_array(ids)});
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
  auto r = conn_.exec(sql::runs::analyze_probe, {std::to_string(min_rows)});
  if (!r) return fail(r.error());
  if (r->empty()) return false;
  if (r->get_int(0, "tuples") >= 0) return true;
  if (r->get_int(0, "rows") < min_rows) return false;
  auto a = conn_.exec_script(std::string(sql::runs::analyze));
  if (!a) return fail(a.error());
  return true;
}

Status ExecutionStore::record_op(const Fence& fence, int op_seq, const RecordedOp& op) {
  // The fence's FOR KEY SHARE holds off a takeover or terminate (each changes
  // the lease row) until this commits: no lease, no event.
  auto r = conn_.exec_keyed(sql::runs::record_op,
                            {fence.execution_id, fence.lease, std::to_string(op_seq), op.kind,
                             op.name, op.payload.dump()});
  if (!r) return fail(r.error());  // kConflict: another holder wrote this position
  if (r->empty()) return fail(Error::conflict("the run's lease is held by another worker"));
  return {};
}

Result<std::optional<std::pair<long long, Json>>> ExecutionStore::next_signal(
    const std::string& execution_id, const std::string& name, long long after) {
  auto r = conn_.exec(sql::runs::next_signal, {execution_id, name, std::to_string(after)});
  if (!r) return fail(r.error());
  if (r->empty()) return std::optional<std::pair<long long, Json>>{};
  return std::optional<std::pair<long long, Json>>{
      std::make_pair(r->get_int(0, "id"), Json::parse(r->get(0, "payload")))};
}

Result<CompletedRun> ExecutionStore::complete(const Fence& fence, const Json& output,
                                              bool entity_reuse) {
  std::vector<store::Statement> statements{
      {sql::runs::complete, {fence.execution_id, fence.lease, output.dump()}, store::Plan::kKeyed}};
  // Only an entity run can hand signals on (its unread signals go to its next
  // run): a plain completion stays one statement.
  if (entity_reuse) {
    statements.push_back({sql::runs::carry_supersede, {fence.execution_id}, store::Plan::kKeyed});
    statements.push_back({sql::runs::carry_next_run, {fence.execution_id}, store::Plan::kKeyed});
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
  // The batch travels as jsonb (see execution_store_starts.cpp).
  std::vector<store::Statement> statements{
      {sql::runs::lock_batch, {text_array(ids)}, store::Plan::kKeyed}};
  const size_t record_at = statements.size();
  if (!records.empty()) {
    statements.push_back({sql::runs::record_batch,
                          {records.dump(), std::to_string(records.size())},
                          store::Plan::kKeyed});
  }
  const size_t complete_at = statements.size();
  if (!completions.empty()) {
    statements.push_back(
        {sql::runs::complete_batch,
         {completions.dump(), std::to_string(completions.size()), text_array(completing)},
         store::Plan::kKeyed});
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
  auto r = conn_.exec(sql::runs::retry_later, {fence.execution_id, fence.lease, error, ms(backoff),
                                               std::to_string(attempt)});
  if (!r) return fail(r.error());
  return !r->empty();
}

namespace {

// Fails a fenced run into the engine's dead letters with `reason` ($4).
Result<bool> fail_into_dead_letters(store::Connection& conn, const Fence& fence,
                                    const std::string& error, const char* reason) {
  auto r = conn.exec(sql::runs::fail, {fence.execution_id, fence.lease, error, reason});
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
      sql::runs::suspend,
      {fence.execution_id, fence.lease, std::to_string(signal_seq_seen), std::to_string(until_ms)});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<bool> ExecutionStore::release(const Fence& fence, std::chrono::milliseconds delay) {
  auto r = conn_.exec(sql::runs::release, {fence.execution_id, fence.lease, ms(delay)});
  if (!r) return fail(r.error());
  return !r->empty();
}

Result<std::vector<std::string>> ExecutionStore::renew_leases(
    const std::vector<std::string>& tokens, std::chrono::milliseconds lease) {
  std::vector<std::string> cancelled;
  if (tokens.empty()) return cancelled;
  auto r = conn_.exec(sql::runs::renew, {text_array(tokens), ms(lease)});
  if (!r) return fail(r.error());
  for (int i = 0; i < r->rows(); ++i) {
    if (r->get_bool(i, "cancel_requested")) cancelled.push_back(r->get(i, "lease_owner"));
  }
  return cancelled;
}

}  // namespace harvest::engine
