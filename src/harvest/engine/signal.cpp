// Engine: signals (ENG-7). A signal is staged for an existing run; a
// signal-with-start attaches to the entity run its workflow_id names,
// starting it first if there is none, atomically (one transaction, signal
// writers serialised on the run's row). Batches of signal-with-starts commit
// together per shard (ExecutionStore::signal_with_start_batch).
#include <fmt/format.h>

#include <map>

#include <harvest/common/ids.hpp>
#include <harvest/common/json.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/connector_starts.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/work_signal.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine {

namespace {

Status check_signal(const std::string& name, const std::optional<std::string>& key,
                    const Json& payload) {
  if (auto ok = check_identifier("signal name", name, IdentifierLimits::kSignalName); !ok) {
    return ok;
  }
  if (auto ok =
          check_identifier_if_set("signal idempotency key", key, IdentifierLimits::kIdempotencyKey);
      !ok) {
    return ok;
  }
  if (auto ok = check_json_storable(payload); !ok) {
    return fail(Error::bad_request("signal payload: " + ok.error().message));
  }
  return {};
}

Error closed_run(const std::string& id, const std::string& workflow,
                 const std::optional<std::string>& workflow_id, const std::string& status) {
  return Error::conflict(fmt::format("execution {} of '{}'{} is {} and accepts no more signals", id,
                                     workflow, workflow_id ? " (" + *workflow_id + ")" : "",
                                     status));
}

}  // namespace

struct Engine::PreparedSignal {
  NewEntitySignal item;
  std::optional<std::string> bad_input;  // why the start input cannot start a run
  bool collision = false;                // set by the store: the key was staged from another record
  bool withheld = false;                 // not committed: another signal of the batch collided
};

Result<SignalOutcome> Engine::signal(const SignalRequest& req) {
  if (auto ok = check_caller_key(req.idempotency_key); !ok) return fail(ok.error());
  if (auto ok = check_signal(req.name, req.idempotency_key, req.payload); !ok) {
    return fail(ok.error());
  }
  // Signals follow their target's shard.
  size_t shard = 0;
  if (req.target.execution_id) {
    auto where = locate(*req.target.execution_id);
    if (!where) return fail(where.error());
    if (!*where) return fail(Error::not_found("no such execution for signal"));
    shard = **where;
  } else if (req.target.workflow && req.target.workflow_id) {
    if (auto ok = check_identifier_if_set("workflow_id", req.target.workflow_id,
                                          IdentifierLimits::kWorkflowId);
        !ok) {
      return fail(ok.error());
    }
    if (auto ok = check_identifier_if_set("workflow name", req.target.workflow,
                                          IdentifierLimits::kWorkflowName);
        !ok) {
      return fail(ok.error());
    }
    shard = route(*req.target.workflow, req.target.workflow_id, std::nullopt);
  } else {
    return fail(Error::bad_request(
        "signal target needs an execution id, or a workflow name and workflow_id"));
  }
  auto conn = pool(shard).acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  ExecutionStore store(**conn);
  auto target = store.lock_target(req.target);
  if (!target) return fail(target.error());
  if (!*target) return fail(Error::not_found("no such execution for signal"));
  const std::string id = (*target)->id;
  const std::string& status = (*target)->status;
  if (is_closed_status(status)) {
    return fail(
        Error::conflict(fmt::format("execution {} is {}; it accepts no more signals", id, status)));
  }
  auto staged = store.stage_signal(id, req.name, req.payload, req.idempotency_key);
  if (!staged) return fail(staged.error());
  if (auto c = tx->commit(); !c) return fail(c.error());
  if (*staged) work_->notify();
  return SignalOutcome{*staged ? SignalOutcomeKind::kDelivered : SignalOutcomeKind::kDuplicate, id};
}

Result<SignalWithStartOutcome> Engine::signal_with_start(const SignalWithStartRequest& req) {
  return std::move(signal_with_start_batch({req}).front());
}

Result<Engine::PreparedSignal> Engine::prepare_signal_with_start(
    const SignalWithStartRequest& req) const {
  if (auto ok = check_identifier("workflow name", req.workflow, IdentifierLimits::kWorkflowName);
      !ok) {
    return fail(ok.error());
  }
  const WorkflowDef* def = workflows_.find(req.workflow);
  if (!def) return fail(Error::not_found(fmt::format("unknown workflow '{}'", req.workflow)));
  if (req.workflow_id.empty()) {
    return fail(Error::bad_request("signal-with-start needs a workflow_id"));
  }
  if (auto ok = check_identifier("workflow_id", req.workflow_id, IdentifierLimits::kWorkflowId);
      !ok) {
    return fail(ok.error());
  }
  if (auto ok = check_signal(req.signal, req.idempotency_key, req.payload); !ok) {
    return fail(ok.error());
  }
  if (auto ok =
          check_identifier_if_set("start_source_ref", req.source_ref, IdentifierLimits::kSourceRef);
      !ok) {
    return fail(ok.error());
  }
  PreparedSignal p;
  // The start input matters only when this call creates the run.
  p.bad_input = def->validate_input(req.start_input);
  if (!p.bad_input) {
    if (auto ok = check_json_storable(req.start_input); !ok) p.bad_input = ok.error().message;
  }
  std::optional<std::string> concurrency_key;
  if (!p.bad_input) {
    if (auto k = concurrency_key_for(*def, req.start_input, req.workflow_id); !k) {
      p.bad_input = k.error().message;
    } else {
      concurrency_key = std::move(*k);
    }
  }
  // An input that cannot start a run never goes to the store: it could not
  // be serialised or stored, and its neighbours in the batch must not pay
  // for it (the item still signals a run that exists).
  p.item =
      NewEntitySignal{.start = NewExecution{.id = new_time_ordered_uuid(),
                                            .workflow = def->name,
                                            .workflow_id = req.workflow_id,
                                            .input = p.bad_input ? Json(nullptr) : req.start_input,
                                            .source = std::string(to_string(req.source)),
                                            .source_ref = req.source_ref,
                                            .trace = req.trace,
                                            .max_attempts = def->options.max_attempts,
                                            .concurrency_key = concurrency_key},
                      .startable = !p.bad_input,
                      .signal = req.signal,
                      .payload = req.payload,
                      .signal_key = req.idempotency_key,
                      .reuse_after_close = req.reuse == WorkflowIdReuse::kAllowAfterClose};
  return p;
}

std::vector<Result<SignalWithStartOutcome>> Engine::signal_with_start_batch(
    const std::vector<SignalWithStartRequest>& requests) {
  std::vector<Result<PreparedSignal>> prepared;
  prepared.reserve(requests.size());
  for (const auto& r : requests) {
    if (auto ok = check_caller_key(r.idempotency_key); !ok) {
      prepared.push_back(fail(ok.error()));
    } else {
      prepared.push_back(prepare_signal_with_start(r));
    }
  }
  return signal_with_start_prepared(prepared);
}

std::vector<Result<internal::Derived<SignalWithStartOutcome>>>
internal::ConnectorStarts::signal_with_start_batch(Engine& engine,
                                                   std::vector<DerivedSignalWithStart> requests,
                                                   bool refuse_collisions) {
  return engine.signal_with_start_batch_derived(std::move(requests), refuse_collisions);
}

std::vector<Result<internal::Derived<SignalWithStartOutcome>>>
Engine::signal_with_start_batch_derived(std::vector<internal::DerivedSignalWithStart> requests,
                                        bool refuse_collisions) {
  std::vector<Result<PreparedSignal>> prepared;
  prepared.reserve(requests.size());
  for (auto& r : requests) {
    if (!std::string_view(r.key).starts_with(kReservedKeyPrefix)) {
      prepared.push_back(
          fail(Error::internal("a derived signal key lies outside the reserved prefix")));
      continue;
    }
    r.request.idempotency_key = std::move(r.key);
    auto p = prepare_signal_with_start(r.request);
    if (p) p->item.signal_fingerprint = r.fingerprint;
    prepared.push_back(std::move(p));
  }
  auto outcomes = signal_with_start_prepared(prepared, refuse_collisions);
  std::vector<Result<internal::Derived<SignalWithStartOutcome>>> out;
  out.reserve(outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (prepared[i] && prepared[i]->withheld) {
      out.push_back(internal::Derived<SignalWithStartOutcome>{.withheld = true});
      continue;
    }
    if (!outcomes[i]) {
      out.push_back(fail(std::move(outcomes[i].error())));
    } else {
      out.push_back(internal::Derived<SignalWithStartOutcome>{
          std::move(*outcomes[i]), prepared[i] && prepared[i]->collision});
    }
  }
  return out;
}

std::vector<Result<SignalWithStartOutcome>> Engine::signal_with_start_prepared(
    std::vector<Result<PreparedSignal>>& prepared, bool refuse_collisions) {
  std::vector<Result<SignalWithStartOutcome>> out(
      prepared.size(), fail(Error::internal("signal-with-start was not processed")));
  std::map<size_t, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (!prepared[i]) {
      out[i] = fail(prepared[i].error());
      continue;
    }
    const auto& s = prepared[i]->item.start;
    by_shard[route(s.workflow, s.workflow_id, std::nullopt)].push_back(i);
  }
  bool woke = false;
  for (const auto& [shard, all] : by_shard) {
    std::vector<NewEntitySignal> items;
    for (size_t i : all) items.push_back(prepared[i]->item);
    auto conn = pool(shard).acquire();
    auto stored = conn ? ExecutionStore(**conn).signal_with_start_batch(
                             items, config_.notify_other_processes, refuse_collisions)
                       : Result<std::vector<StoredEntitySignal>>(fail(conn.error()));
    // One work list per shard: the batch, or — when the database refused the
    // batch as a whole although every item passed validation — each item in
    // a transaction of its own, so only the item at fault fails.
    std::vector<std::vector<size_t>> rounds{all};
    std::vector<Result<std::vector<StoredEntitySignal>>> answers;
    answers.push_back(std::move(stored));
    if (!answers.front() && is_permanent(answers.front().error()) && all.size() > 1) {
      log::warn("a batch of {} signal-with-starts was refused ({}); retrying them one by one",
                all.size(), answers.front().error().describe());
      rounds.clear();
      answers.clear();
      // On the same connection: the batch's transaction is over, and taking
      // another from the pool while holding this one could starve it.
      for (size_t i : all) {
        rounds.push_back({i});
        answers.push_back(ExecutionStore(**conn).signal_with_start_batch(
            {&prepared[i]->item, 1}, config_.notify_other_processes, refuse_collisions));
      }
    }
    for (size_t round = 0; round < rounds.size(); ++round) {
      const std::vector<size_t>& indices = rounds[round];
      auto& stored = answers[round];
      if (stored && stored->size() != indices.size()) {
        stored = fail(Error::internal("the store answered a signal batch with the wrong count"));
      }
      items.clear();
      for (size_t i : indices) items.push_back(prepared[i]->item);
      for (size_t k = 0; k < indices.size(); ++k) {
        const size_t i = indices[k];
        if (!stored) {
          out[i] = fail(stored.error());
          continue;
        }
        const StoredEntitySignal& s = (*stored)[k];
        const NewExecution& start = items[k].start;
        if (s.withheld) {
          prepared[i]->withheld = true;
          out[i] = fail(Error::transient_error(
              "not committed: another signal of its batch met a coordinate collision; retry"));
          continue;
        }
        if (s.missing) {
          out[i] = prepared[i]->bad_input
                       ? fail(Error::invalid_input(
                             fmt::format("start input does not match workflow '{}': {}",
                                         start.workflow, *prepared[i]->bad_input)))
                       : fail(Error::transient_error("execution vanished; retry"));
          continue;
        }
        if (s.closed_status) {
          Error e = closed_run(s.execution_id, start.workflow, start.workflow_id, *s.closed_status);
          log::warn("signal '{}' to workflow '{}' id '{}' refused ({}): {}", items[k].signal,
                    start.workflow, start.workflow_id.value_or(""),
                    start.source_ref.value_or("no source ref"), e.message);
          config_.metrics->increment(
              metrics::kEngineSignalsRefused,
              {{"workflow", workflow_label(start.workflow)}, {"reason", "run_closed"}});
          out[i] = fail(std::move(e));
          continue;
        }
        woke = woke || !s.duplicate_signal;
        prepared[i]->collision = s.collision;
        if (s.started) {
          config_.metrics->increment(metrics::kEngineStarts,
                                     {{"workflow", start.workflow}, {"outcome", "started"}});
        }
        out[i] = SignalWithStartOutcome{s.execution_id, s.started, s.duplicate_signal, s.run_no};
      }
    }
  }
  if (woke) work_->notify();
  return out;
}

}  // namespace harvest::engine
