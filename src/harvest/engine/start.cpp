// Engine: starts (ENG-4/5/6/9/11/16). A start is validated (workflow known,
// identifiers within their limits, input acceptable and storable, key rules),
// then either committed with the other immediate starts of its shard in one
// group-commit transaction (ExecutionStore::start_batch), or handed to its
// workflow's admission policy (admission.cpp) when that defers starts.
#include <fmt/format.h>

#include <map>

#include <harvest/common/ids.hpp>
#include <harvest/common/json.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/admission.hpp>
#include <harvest/engine/connector_starts.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/work_signal.hpp>

namespace harvest::engine {

struct Engine::PreparedStart {
  const WorkflowDef* def = nullptr;
  NewExecution exec;
  bool collision = false;  // set by the store: the key's run came from another record
  bool withheld = false;   // not committed: another start of the batch collided
};

Result<Engine::PreparedStart> Engine::prepare_start(const StartRequest& req) const {
  if (auto ok = check_identifier("workflow name", req.workflow, IdentifierLimits::kWorkflowName);
      !ok) {
    return fail(ok.error());
  }
  const WorkflowDef* def = workflows_.find(req.workflow);
  if (!def) return fail(Error::not_found(fmt::format("unknown workflow '{}'", req.workflow)));
  if (auto ok =
          check_identifier_if_set("workflow_id", req.workflow_id, IdentifierLimits::kWorkflowId);
      !ok) {
    return fail(ok.error());
  }
  if (req.idempotency_key) {
    if (auto ok = check_identifier_if_set("idempotency key", req.idempotency_key,
                                          IdentifierLimits::kIdempotencyKey);
        !ok) {
      return fail(ok.error());
    }
    if (def->options.defers_admission()) {
      return fail(Error::bad_request(fmt::format(
          "workflow '{}' has a {} admission policy, which defers starts and has no "
          "execution id to return for an idempotency key; omit the key and use workflow_id "
          "for deduplication",
          req.workflow,
          def->options.throttle ? "throttle" : (def->options.debounce ? "debounce" : "batch"))));
    }
  }
  if (auto ok =
          check_identifier_if_set("start_source_ref", req.source_ref, IdentifierLimits::kSourceRef);
      !ok) {
    return fail(ok.error());
  }
  // A batched workflow's input is the array of its admissions.
  if (auto bad = def->validate_input(def->options.batch ? Json::array({req.input}) : req.input)) {
    return fail(Error::invalid_input(
        fmt::format("input does not match workflow '{}': {}", req.workflow, *bad)));
  }
  if (auto ok = check_json_storable(req.input); !ok) {
    return fail(Error::bad_request("input: " + ok.error().message));
  }
  auto concurrency_key = concurrency_key_for(*def, req.input, req.workflow_id);
  if (!concurrency_key) return fail(concurrency_key.error());
  PreparedStart p;
  p.def = def;
  p.exec = NewExecution{.id = new_time_ordered_uuid(),
                        .workflow = def->name,
                        .workflow_id = req.workflow_id,
                        .input = req.input,
                        .idempotency_key = req.idempotency_key,
                        .source = std::string(to_string(req.source)),
                        .source_ref = req.source_ref,
                        .trace = req.trace,
                        .max_attempts = def->options.max_attempts,
                        .concurrency_key = std::move(*concurrency_key)};
  return p;
}

Result<StartOutcome> Engine::start(const StartRequest& request) {
  return std::move(start_batch({request}).front());
}

std::vector<Result<StartOutcome>> Engine::start_batch(const std::vector<StartRequest>& requests) {
  std::vector<Result<PreparedStart>> prepared;
  prepared.reserve(requests.size());
  for (const auto& r : requests) {
    if (auto ok = check_caller_key(r.idempotency_key); !ok) {
      prepared.push_back(fail(ok.error()));
    } else {
      prepared.push_back(prepare_start(r));
    }
  }
  auto out = start_prepared(prepared);
  for (size_t i = 0; i < requests.size(); ++i) record_start(requests[i].workflow, out[i]);
  return out;
}

std::vector<Result<internal::Derived<StartOutcome>>> internal::ConnectorStarts::start_batch(
    Engine& engine, std::vector<DerivedStart> requests, bool refuse_collisions) {
  return engine.start_batch_derived(std::move(requests), refuse_collisions);
}

std::vector<Result<internal::Derived<StartOutcome>>> Engine::start_batch_derived(
    std::vector<internal::DerivedStart> requests, bool refuse_collisions) {
  std::vector<Result<PreparedStart>> prepared;
  prepared.reserve(requests.size());
  for (auto& r : requests) {
    if (r.key && !std::string_view(*r.key).starts_with(kReservedKeyPrefix)) {
      prepared.push_back(
          fail(Error::internal("a derived start key lies outside the reserved prefix")));
      continue;
    }
    // The derived key replaces whatever key the request carried.
    r.request.idempotency_key = std::move(r.key);
    auto p = prepare_start(r.request);
    if (p && p->exec.idempotency_key) p->exec.fingerprint = r.fingerprint;
    prepared.push_back(std::move(p));
  }
  auto outcomes = start_prepared(prepared, refuse_collisions);
  std::vector<Result<internal::Derived<StartOutcome>>> out;
  out.reserve(outcomes.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (prepared[i] && prepared[i]->withheld) {
      out.push_back(internal::Derived<StartOutcome>{.withheld = true});
      continue;
    }
    record_start(requests[i].request.workflow, outcomes[i]);
    if (!outcomes[i]) {
      out.push_back(fail(std::move(outcomes[i].error())));
    } else {
      out.push_back(internal::Derived<StartOutcome>{std::move(*outcomes[i]),
                                                    prepared[i] && prepared[i]->collision});
    }
  }
  return out;
}

std::vector<Result<StartOutcome>> Engine::start_prepared(
    std::vector<Result<PreparedStart>>& prepared, bool refuse_collisions) {
  std::vector<Result<StartOutcome>> out(prepared.size(),
                                        fail(Error::internal("start was not processed")));
  std::map<size_t, std::vector<PreparedStart*>> immediate;  // shard -> starts
  std::map<size_t, std::vector<Result<StartOutcome>*>> immediate_out;
  bool admitted_any = false;
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (!prepared[i]) {
      out[i] = fail(prepared[i].error());
      continue;
    }
    PreparedStart& p = *prepared[i];
    const size_t shard = route(p.exec.workflow, p.exec.workflow_id, p.exec.idempotency_key);
    if (!p.def->options.defers_admission()) {
      immediate[shard].push_back(&p);
      immediate_out[shard].push_back(&out[i]);
      continue;
    }
    // Deferred admission keeps its own per-workflow state (a throttle window,
    // a debounce slot, a batch): one transaction per start.
    auto conn = pool(shard).acquire();
    if (!conn) {
      out[i] = fail(conn.error());
      continue;
    }
    auto tx = store::Transaction::begin(**conn);
    if (!tx) {
      out[i] = fail(tx.error());
      continue;
    }
    auto admitted = admission::admit(**conn, *p.def, p.exec);
    if (admitted) {
      if (auto c = tx->commit(); !c) admitted = fail(c.error());
    }
    if (admitted && admitted->kind == StartOutcomeKind::kStarted) admitted_any = true;
    out[i] = std::move(admitted);
  }
  for (auto& [shard, items] : immediate) {
    start_immediate_on(shard, items, immediate_out[shard], refuse_collisions);
  }
  if (admitted_any) work_->notify();
  return out;
}

void Engine::start_immediate_on(size_t shard, std::vector<PreparedStart*>& items,
                                std::vector<Result<StartOutcome>*>& outcomes,
                                bool refuse_collisions) {
  auto set_all = [&](const Error& e) {
    for (auto* o : outcomes) *o = fail(e);
  };
  std::vector<NewExecution> batch;
  batch.reserve(items.size());
  for (auto* p : items) batch.push_back(p->exec);
  // The connection goes back to the pool before any one-by-one retry below,
  // which takes its own (holding it would starve a small pool).
  auto stored = [&]() -> Result<std::vector<Result<StoredStart>>> {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    return ExecutionStore(**conn).start_batch(batch, config_.start_idempotency_window,
                                              config_.notify_other_processes, refuse_collisions);
  }();
  if (!stored && is_permanent(stored.error()) && batch.size() > 1) {
    // Something in the batch is refused by the database although it passed
    // validation: commit the others one by one so only that start fails.
    log::warn("a batch of {} starts was refused ({}); retrying them one by one", batch.size(),
              stored.error().describe());
    for (size_t i = 0; i < items.size(); ++i) {
      std::vector<PreparedStart*> one{items[i]};
      std::vector<Result<StartOutcome>*> one_out{outcomes[i]};
      start_immediate_on(shard, one, one_out, refuse_collisions);
    }
    return;
  }
  if (!stored) return set_all(stored.error());
  if (stored->size() != items.size()) {
    return set_all(Error::internal("the store answered a start batch with the wrong count"));
  }
  bool started = false;
  for (size_t i = 0; i < items.size(); ++i) {
    auto& s = (*stored)[i];
    if (!s) {
      *outcomes[i] = fail(s.error());
      continue;
    }
    if (s->withheld) {
      items[i]->withheld = true;
      *outcomes[i] = fail(Error::transient_error(
          "not committed: another start of its batch met a coordinate collision; retry"));
      continue;
    }
    started = started || s->started;
    items[i]->collision = s->collision;
    *outcomes[i] =
        StartOutcome{s->started ? StartOutcomeKind::kStarted : StartOutcomeKind::kIdempotentReplay,
                     s->execution_id};
  }
  if (started) work_->notify();
}

Result<StartOutcome> Engine::start_in_transaction(PGconn* raw, const StartRequest& request) {
  if (auto ok = check_caller_key(request.idempotency_key); !ok) return fail(ok.error());
  auto conn = store::Connection::borrow(raw);
  if (!conn->in_transaction()) {
    return fail(Error::bad_request(
        "start_in_transaction needs a connection inside an open transaction (BEGIN first)"));
  }
  auto r = [&]() -> Result<StartOutcome> {
    auto p = prepare_start(request);
    if (!p) return fail(p.error());
    if (p->def->options.defers_admission()) return admission::admit(*conn, *p->def, p->exec);
    // The same statements as a group commit, inside the caller's transaction:
    // the caller's COMMIT makes the start durable, and delivers the NOTIFY
    // that wakes workers.
    auto stored = ExecutionStore(*conn).start_batch({&p->exec, 1}, config_.start_idempotency_window,
                                                    config_.notify_other_processes);
    if (!stored) return fail(stored.error());
    auto& s = stored->front();
    if (!s) return fail(s.error());
    return StartOutcome{
        s->started ? StartOutcomeKind::kStarted : StartOutcomeKind::kIdempotentReplay,
        s->execution_id};
  }();
  record_start(request.workflow, r);
  return r;
}

}  // namespace harvest::engine
