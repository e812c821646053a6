// Deferred admission (ENG-8): admitting starts under a throttle, debounce or
// batch policy, and firing them once due.
#include <fmt/format.h>

#include <algorithm>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/admission.hpp>
#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/sql/admission.hpp>

namespace harvest::engine::admission {

namespace {

// Starts a new window for `workflow` when the current one has elapsed and
// returns the tokens used in it, and whether earlier starts are still queued.
// Locks the workflow's throttle row for the rest of the transaction.
Result<store::PgResult> refresh_throttle_window(store::Connection& conn,
                                                const std::string& workflow,
                                                const ThrottlePolicy& policy) {
  return conn.exec(sql::admission::refresh_throttle_window,
                   {workflow, std::to_string(policy.period.count())});
}

StartOutcome started(std::string id) {
  return {StartOutcomeKind::kStarted, std::move(id)};
}
StartOutcome deferred() {
  return {StartOutcomeKind::kDeferred, std::nullopt};
}

// Trailing-edge debounce: every start pushes the firing time out and
// replaces the input; fire_due starts it once quiet.
Result<StartOutcome> admit_debounced(store::Connection& conn, const WorkflowDef& def,
                                     const NewExecution& s) {
  if (!s.workflow_id) {
    return fail(Error::bad_request(fmt::format(
        "workflow '{}' is debounced: a start needs a workflow_id to collapse on", def.name)));
  }
  auto d = conn.exec(sql::admission::debounce,
                     {def.name, s.workflow_id, s.input.dump(), s.source, s.source_ref,
                      std::to_string(def.options.debounce->window.count())});
  if (!d) return fail(d.error());
  return deferred();
}

// A start with a workflow id joins the batch once: a repeat (a redelivery)
// while the item waits, or after its batch fired, is a no-op.
Result<StartOutcome> admit_batched(store::Connection& conn, const WorkflowDef& def,
                                   const NewExecution& s) {
  auto b = conn.exec(sql::admission::add_batch_item,
                     {def.name, s.workflow_id, s.input.dump(), s.source, s.source_ref});
  if (!b) return fail(b.error());
  return deferred();
}

Result<StartOutcome> admit_throttled(store::Connection& conn, const WorkflowDef& def,
                                     const NewExecution& s) {
  const auto& policy = *def.options.throttle;
  ExecutionStore executions(conn);
  if (s.workflow_id) {
    auto found = executions.find(def.name, *s.workflow_id);
    if (!found) return fail(found.error());
    if (*found) return StartOutcome{StartOutcomeKind::kIdempotentReplay, **found};
  }
  if (auto r = conn.exec(sql::admission::ensure_throttle, {def.name}); !r) {
    return fail(r.error());
  }
  auto window = refresh_throttle_window(conn, def.name, policy);
  if (!window) return fail(window.error());
  const bool queued = window->get_bool(0, "queued");
  if (!queued && window->get_int(0, "used") < policy.starts) {
    auto id = executions.insert(s);
    if (!id) return fail(id.error());
    if (!*id) {
      auto existing = executions.find(def.name, *s.workflow_id);
      if (!existing) return fail(existing.error());
      if (!*existing) return fail(Error::transient_error("execution vanished during start; retry"));
      return StartOutcome{StartOutcomeKind::kIdempotentReplay, **existing};
    }
    if (auto r = conn.exec(sql::admission::take_throttle_token, {def.name}); !r) {
      return fail(r.error());
    }
    return started(**id);
  }
  // Over the rate (or behind earlier deferred starts, to stay FIFO): queue
  // it. A second deferral of the same workflow_id collapses into the queued
  // one, which is what lets the connector's WorkflowId fallback dedupe it.
  auto d = conn.exec(sql::admission::defer_start,
                     {def.name, s.workflow_id, s.input.dump(), s.source, s.source_ref});
  if (!d) return fail(d.error());
  return deferred();
}

NewExecution fired(const WorkflowDef& def, std::optional<std::string> workflow_id, Json input,
                   std::string source, std::optional<std::string> source_ref) {
  // The key was checked when the start was admitted; a function that fails
  // now (it is not deterministic) leaves the fired run unkeyed.
  auto key = concurrency_key_for(def, input, workflow_id);
  if (!key) log::warn("{}; the fired run has no concurrency key", key.error().message);
  return NewExecution{.id = new_time_ordered_uuid(),
                      .workflow = def.name,
                      .workflow_id = std::move(workflow_id),
                      .input = std::move(input),
                      .source = std::move(source),
                      .source_ref = std::move(source_ref),
                      .max_attempts = def.options.max_attempts,
                      .concurrency_key = key ? std::move(*key) : std::nullopt};
}

// Rows of a DELETE ... RETURNING in id order (RETURNING has no ORDER BY).
std::vector<int> by_id(const store::PgResult& rows) {
  std::vector<int> order(rows.rows());
  for (int i = 0; i < rows.rows(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return rows.get_int(a, "id") < rows.get_int(b, "id"); });
  return order;
}

Result<int> fire_throttled(store::Pool& pool, const WorkflowDef& def) {
  const auto& policy = *def.options.throttle;
  auto conn = pool.acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  auto window = refresh_throttle_window(**conn, def.name, policy);
  if (!window) return fail(window.error());
  if (window->empty()) return 0;  // never throttled anything yet
  const long long available = policy.starts - window->get_int(0, "used");
  if (available <= 0) return 0;
  auto popped = (*conn)->exec(sql::admission::pop_deferred, {def.name, std::to_string(available)});
  if (!popped) return fail(popped.error());
  ExecutionStore executions(**conn);
  int created = 0;
  for (int i : by_id(*popped)) {
    auto id = executions.insert(
        fired(def, popped->get_opt(i, "workflow_id"), Json::parse(popped->get(i, "input")),
              popped->get(i, "start_source"), popped->get_opt(i, "start_source_ref")));
    if (!id) return fail(id.error());
    if (*id) ++created;
  }
  if (popped->rows() > 0) {
    auto used = (*conn)->exec(sql::admission::spend_throttle_tokens,
                              {def.name, std::to_string(popped->rows())});
    if (!used) return fail(used.error());
  }
  if (auto c = tx->commit(); !c) return fail(c.error());
  return created;
}

Result<int> fire_debounced(store::Pool& pool, const WorkflowDef& def) {
  auto conn = pool.acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  auto due = (*conn)->exec(sql::admission::take_due_debounces, {def.name});
  if (!due) return fail(due.error());
  ExecutionStore executions(**conn);
  int created = 0;
  for (int i = 0; i < due->rows(); ++i) {
    // Each fired run is "<workflow_id>#<n>", so a later burst fires a new run
    // rather than colliding with the first one's workflow-id dedupe.
    auto id = executions.insert(
        fired(def, fmt::format("{}#{}", due->get(i, "workflow_id"), due->get(i, "fired_runs")),
              Json::parse(due->get(i, "input")), due->get(i, "start_source"),
              due->get_opt(i, "start_source_ref")));
    if (!id) return fail(id.error());
    if (*id) ++created;
  }
  if (auto c = tx->commit(); !c) return fail(c.error());
  return created;
}

// Fires full batches, then a partial one whose oldest item waited max_wait.
Result<int> fire_batches(store::Pool& pool, const WorkflowDef& def) {
  const auto& policy = *def.options.batch;
  int created = 0;
  while (true) {
    auto conn = pool.acquire();
    if (!conn) return fail(conn.error());
    auto tx = store::Transaction::begin(**conn);
    if (!tx) return fail(tx.error());
    // One firer per batched workflow at a time, so concurrent workers
    // cannot split a batch that was neither full nor due.
    if (auto l = (*conn)->exec(sql::admission::batch_lock, {def.name}); !l) {
      return fail(l.error());
    }
    auto ready = (*conn)->exec(
        sql::admission::batch_ready,
        {def.name, std::to_string(policy.max_size), std::to_string(policy.max_wait.count())});
    if (!ready) return fail(ready.error());
    if (ready->is_null(0, 0) || !ready->get_bool(0, "ready")) break;
    auto items = (*conn)->exec(sql::admission::take_batch_items,
                               {def.name, std::to_string(policy.max_size)});
    if (!items) return fail(items.error());
    if (items->empty()) break;
    const auto order = by_id(*items);
    Json batch = Json::array();
    Json ids = Json::array();
    for (int i : order) {
      batch.push_back(Json::parse(items->get(i, "input")));
      ids.push_back(items->get_int(i, "id"));
    }
    auto id = ExecutionStore(**conn).insert(fired(def, std::nullopt, std::move(batch),
                                                  items->get(order[0], "start_source"),
                                                  items->get_opt(order[0], "start_source_ref")));
    if (!id) return fail(id.error());
    if (!*id) return fail(Error::internal("a batch run without a workflow id was not created"));
    // Keyed items stay, pointing at their run (the dedupe record); the rest go.
    auto taken = (*conn)->exec_pipeline({{sql::admission::mark_batch_fired, {ids.dump(), **id}},
                                         {sql::admission::drop_fired_batch_items, {ids.dump()}}});
    if (!taken) return fail(taken.error());
    if (auto c = tx->commit(); !c) return fail(c.error());
    ++created;
  }
  return created;
}

}  // namespace

Result<StartOutcome> admit(store::Connection& conn, const WorkflowDef& def,
                           const NewExecution& start) {
  if (def.options.debounce) return admit_debounced(conn, def, start);
  if (def.options.batch) return admit_batched(conn, def, start);
  return admit_throttled(conn, def, start);
}

Result<int> fire_due(store::Pool& pool, const WorkflowRegistry& workflows) {
  int created = 0;
  for (const auto& name : workflows.names()) {
    const WorkflowDef& def = *workflows.find(name);
    // Throttles first (every workflow), as tokens free; then the others.
    if (!def.options.throttle) continue;
    auto n = fire_throttled(pool, def);
    if (!n) return fail(n.error());
    created += *n;
  }
  for (const auto& name : workflows.names()) {
    const WorkflowDef& def = *workflows.find(name);
    if (def.options.debounce) {
      auto n = fire_debounced(pool, def);
      if (!n) return fail(n.error());
      created += *n;
    }
    if (def.options.batch) {
      auto n = fire_batches(pool, def);
      if (!n) return fail(n.error());
      created += *n;
    }
  }
  return created;
}

}  // namespace harvest::engine::admission
