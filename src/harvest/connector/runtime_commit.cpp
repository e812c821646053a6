// ConnectorRuntime's commit phase: a group of mapped messages to the engine
// (the derived-key path, engine/connector_starts.hpp), each outcome turned
// into a verdict, and coordinate collisions (a record at a position an
// earlier record used: a recreated topic, another cluster) handled as the
// binding's CollisionPolicy says — held, dead-lettered or started again
// under a fingerprinted key.
#include <fmt/format.h>

#include <algorithm>

#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/connector/runtime_impl.hpp>
#include <harvest/connector/settlement.hpp>
#include <harvest/connector/strike_counter.hpp>
#include <harvest/engine/connector_starts.hpp>

namespace harvest::connector {

std::optional<std::string> ConnectorRuntime::Impl::collision_hold() const {
  std::lock_guard lock(live_->hold_mu);
  return live_->collision_hold;
}

std::vector<Result<ConnectorRuntime::Impl::Committed>> ConnectorRuntime::Impl::commit_to_engine(
    std::vector<Mapped*>& group) {
  const SourceBinding& b = *binding_;
  // kHold: a group with a collision commits nothing (commit_holding).
  const bool refuse = b.collision_policy() == CollisionPolicy::kHold;
  std::vector<Result<Committed>> out;
  out.reserve(group.size());
  if (b.kind() == BindingKind::kSignalsWithStart) {
    std::vector<engine::internal::DerivedSignalWithStart> reqs;
    reqs.reserve(group.size());
    for (Mapped* g : group) {
      Json start_input =
          g->message.start_input ? std::move(*g->message.start_input) : b.entity_start_input();
      reqs.push_back({engine::SignalWithStartRequest{.workflow = b.workflow(),
                                                     .workflow_id = g->message.workflow_id,
                                                     .start_input = std::move(start_input),
                                                     .signal = b.signal(),
                                                     .payload = std::move(g->message.payload),
                                                     .source = engine::StartSource::kBroker,
                                                     .source_ref = g->ref,
                                                     .trace = std::move(g->trace),
                                                     .reuse = b.workflow_id_reuse()},
                      g->key->value(), g->fingerprint});
    }
    for (auto& r : engine::internal::ConnectorStarts::signal_with_start_batch(
             engine_, std::move(reqs), refuse)) {
      if (!r) {
        out.push_back(fail(r.error()));
      } else if (r->withheld) {
        out.push_back(Committed{.withheld = true});
      } else {
        out.push_back(Committed{r->outcome.duplicate_signal ? DispatchOutcome::kIdempotentReplay
                                                            : DispatchOutcome::kDispatched,
                                r->outcome.execution_id, r->collision});
      }
    }
    return out;
  }
  std::vector<engine::internal::DerivedStart> reqs;
  reqs.reserve(group.size());
  for (Mapped* g : group) {
    engine::internal::DerivedStart d{engine::StartRequest{.workflow = b.workflow(),
                                                          .workflow_id = g->message.workflow_id,
                                                          .input = std::move(g->message.payload),
                                                          .source = engine::StartSource::kBroker,
                                                          .source_ref = g->ref,
                                                          .trace = std::move(g->trace)},
                                     std::nullopt, std::nullopt};
    // WorkflowId mode dedupes on the mapped id alone: no derived key.
    if (mode_ == IdempotencyMode::kBrokerCoordinates) {
      d.key = g->key->value();
      d.fingerprint = g->fingerprint;
    }
    reqs.push_back(std::move(d));
  }
  for (auto& r : engine::internal::ConnectorStarts::start_batch(engine_, std::move(reqs), refuse)) {
    if (!r) {
      out.push_back(fail(r.error()));
      continue;
    }
    if (r->withheld) {
      out.push_back(Committed{.withheld = true});
      continue;
    }
    switch (r->outcome.kind) {
      case engine::StartOutcomeKind::kIdempotentReplay:
        out.push_back(
            Committed{DispatchOutcome::kIdempotentReplay, r->outcome.execution_id, r->collision});
        break;
      case engine::StartOutcomeKind::kDeferred:
        out.push_back(Committed{DispatchOutcome::kDeferred, std::nullopt});
        break;
      case engine::StartOutcomeKind::kStarted:
        out.push_back(Committed{DispatchOutcome::kDispatched, r->outcome.execution_id});
        break;
    }
  }
  return out;
}

Dispatched ConnectorRuntime::Impl::settle_outcome(const Message& m, const Mapped& mapped,
                                                  const Result<Committed>& outcome) {
  if (!outcome) {
    if (is_permanent(outcome.error())) {
      return poison(m, mapped.key->value(), DeadLetterReason::kStartRejected,
                    outcome.error().message, 1);
    }
    // The store is unreachable: the message is held, and the outage logged
    // once, rather than once per message.
    if (is_unavailable(outcome.error())) return {Verdict::kHold, RetryReason::kStoreUnavailable};
    // Not the message's fault (database down, pool exhausted): leave it
    // unacked and let the broker redeliver at its own pace.
    log::warn("binding '{}': transient dispatch failure for {}: {}", binding_->name(), mapped.ref,
              outcome.error().describe());
    return {Verdict::kRetry, RetryReason::kTransient};
  }
  strikes_->reset(mapped.key->value());
  if (outcome->collision) return collided(m, mapped, *outcome);
  return {Verdict::kSettled, outcome->outcome};
}

Dispatched ConnectorRuntime::Impl::collided(const Message& m, const Mapped& mapped,
                                            const Committed& earlier) {
  const CollisionPolicy policy = binding_->collision_policy();
  metrics_->increment(metrics::kConnectorCollisions, {{"source", binding_->name()}});
  ++live_->collisions;
  const std::string run = earlier.execution_id.value_or("(unknown)");
  if (policy == CollisionPolicy::kDeadLetter && mapped.fingerprint) {
    // Its own row, keyed by the record (a second recreation's record at the
    // same position is another row; this record's redelivery is not).
    const DedupeKey letter_key = DedupeKey::derive_fingerprinted(
        binding_->name(), binding_->incarnation(), m.coordinates, *mapped.fingerprint);
    return poison(m, letter_key.value(), DeadLetterReason::kCoordinateCollision,
                  fmt::format("the dedupe key of {} is held by run {}, recorded from a different "
                              "record at the same position (a recreated topic or another "
                              "cluster): replay this dead letter once the binding has a new "
                              "key_incarnation",
                              mapped.ref, run),
                  1);
  }
  // kHold (kDispatch lands here only if its fingerprinted start collided
  // too, which two different records cannot do): stop and say so.
  return {.verdict = Verdict::kCollisionHold,
          .detail = fmt::format(
              "binding '{}' holds on a coordinate collision at {}: its dedupe key is held by run "
              "{}, recorded from a different record at the same position, so the topic was "
              "recreated or the binding now reads another cluster. Nothing at or past {} is "
              "committed and no new message is taken. Give the binding a new key_incarnation "
              "(e.g. the date of the cutover) and restart it; or set on_collision to "
              "dead_letter or dispatch",
              binding_->name(), mapped.ref, run, mapped.ref)};
}

bool ConnectorRuntime::Impl::behind_held_collision(const Message& m) {
  const auto at = position_of(m.coordinates);
  if (!at) return false;
  std::lock_guard lock(held_mu_);
  const auto held = held_from_.find(at->partition);
  return held != held_from_.end() && at->offset >= held->second;
}

std::vector<std::optional<Result<ConnectorRuntime::Impl::Committed>>>
ConnectorRuntime::Impl::commit_holding(const std::vector<Message>& messages,
                                       std::vector<Mapped>& mapped,
                                       const std::vector<size_t>& group) {
  std::vector<std::optional<Result<Committed>>> out(group.size());
  std::vector<size_t> pending;  // positions in `group` still to commit
  for (size_t n = 0; n < group.size(); ++n) {
    if (!behind_held_collision(messages[group[n]])) pending.push_back(n);
  }
  // Each round either commits, or finds at least one collision and drops
  // it (and what follows it on its partition) from the next: it ends.
  for (bool first = true; !pending.empty(); first = false) {
    std::vector<Mapped*> items;
    for (size_t n : pending) {
      Mapped& m = mapped[group[n]];
      if (!first) {
        // The round before took the mapped message: map it again.
        MappingOutcome again = apply_mapper(messages[group[n]]);
        if (again.kind != MappingOutcome::Kind::kMapped) {
          out[n] = fail(
              Error::transient_error("mapping a withheld message again failed: " + again.detail));
          continue;
        }
        m.message = std::move(again.mapped);
      }
      items.push_back(&m);
    }
    std::vector<size_t> sent;
    for (size_t n : pending) {
      if (!out[n]) sent.push_back(n);
    }
    auto committed = commit_to_engine(items);
    std::vector<size_t> withheld;
    for (size_t k = 0; k < sent.size() && k < committed.size(); ++k) {
      const size_t n = sent[k];
      auto& c = committed[k];
      if (c && c->withheld) {
        withheld.push_back(n);
        continue;
      }
      if (c && c->collision) {
        if (const auto at = position_of(messages[group[n]].coordinates)) {
          std::lock_guard lock(held_mu_);
          auto [it, fresh] = held_from_.try_emplace(at->partition, at->offset);
          if (!fresh) it->second = std::min(it->second, at->offset);
        }
      }
      out[n] = std::move(c);
    }
    pending.clear();
    for (size_t n : withheld) {
      if (!behind_held_collision(messages[group[n]])) pending.push_back(n);
    }
  }
  // What is held stays unset: at or past a collision on its partition.
  for (size_t n = 0; n < group.size(); ++n) {
    if (!out[n] && !behind_held_collision(messages[group[n]])) {
      out[n] = fail(Error::transient_error("not committed; retry"));
    }
  }
  return out;
}

void ConnectorRuntime::Impl::redispatch_collided(const std::vector<Message>& messages,
                                                 std::vector<Mapped>& mapped,
                                                 const std::vector<size_t>& group,
                                                 std::vector<Result<Committed>>& outcomes) {
  std::vector<size_t> again;  // positions in `group`
  for (size_t n = 0; n < outcomes.size(); ++n) {
    if (outcomes[n] && outcomes[n]->collision && mapped[group[n]].fingerprint) again.push_back(n);
  }
  if (again.empty()) return;
  const SourceBinding& b = *binding_;
  std::vector<Mapped*> items;
  std::vector<size_t> at;
  for (size_t n : again) {
    const size_t i = group[n];
    metrics_->increment(metrics::kConnectorCollisions, {{"source", b.name()}});
    ++live_->collisions;
    // The first commit took the mapped message: map it again.
    MappingOutcome remapped = apply_mapper(messages[i]);
    if (remapped.kind != MappingOutcome::Kind::kMapped) {
      outcomes[n] = fail(
          Error::transient_error("mapping the collided message again failed: " + remapped.detail));
      continue;
    }
    log::warn(
        "binding '{}': coordinate collision at {} (its key is held by run {}, recorded from a "
        "different record); on_collision(dispatch) starts it under a key derived from its "
        "fingerprint",
        b.name(), mapped[i].ref, outcomes[n]->execution_id.value_or("(unknown)"));
    mapped[i].message = std::move(remapped.mapped);
    mapped[i].key = DedupeKey::derive_fingerprinted(
        b.name(), b.incarnation(), messages[i].coordinates, *mapped[i].fingerprint);
    items.push_back(&mapped[i]);
    at.push_back(n);
  }
  if (items.empty()) return;
  auto second = commit_to_engine(items);
  for (size_t k = 0; k < at.size() && k < second.size(); ++k)
    outcomes[at[k]] = std::move(second[k]);
}

void ConnectorRuntime::Impl::commit_group(const std::vector<Message>& messages,
                                          std::vector<Mapped>& mapped,
                                          const std::vector<size_t>& group,
                                          std::vector<Dispatched>& results) {
  std::vector<Mapped*> items;
  items.reserve(group.size());
  for (size_t i : group) items.push_back(&mapped[i]);
  std::vector<std::optional<Result<Committed>>> outcomes;
  try {
    HARVEST_FAULT_POINT("connector.group_commit");
    if (binding_->collision_policy() == CollisionPolicy::kHold) {
      outcomes = commit_holding(messages, mapped, group);
    } else {
      auto committed = commit_to_engine(items);
      if (binding_->collision_policy() == CollisionPolicy::kDispatch) {
        redispatch_collided(messages, mapped, group, committed);
      }
      for (auto& c : committed) outcomes.emplace_back(std::move(c));
    }
  } catch (const std::exception& e) {
    // The engine answers per item; an exception here is a defect, and the
    // messages stay on the broker.
    log::error("binding '{}': group commit of {} messages failed unexpectedly: {}",
               binding_->name(), group.size(), e.what());
    outcomes.clear();
  }
  const auto done = config_.clock->now();
  for (size_t n = 0; n < group.size(); ++n) {
    const size_t i = group[n];
    if (n < outcomes.size() && !outcomes[n]) {
      // Past a collision on its partition: held with it, reported by it.
      results[i] = Dispatched{.verdict = Verdict::kCollisionHold};
    } else {
      results[i] = n < outcomes.size() ? settle_outcome(messages[i], mapped[i], *outcomes[n])
                                       : Dispatched{Verdict::kRetry, RetryReason::kTransient};
    }
    metrics_->observe(metrics::kConnectorDispatchSeconds, {{"source", binding_->name()}},
                      std::chrono::duration<double>(done - mapped[i].started).count());
  }
}

void ConnectorRuntime::Impl::hold_on_collision(const Dispatched& d, PassSummary& summary) {
  // The collision itself carries the report; what follows it on its
  // partition is held with it.
  if (d.detail.empty()) return;
  ++summary.collisions;
  std::lock_guard lock(live_->hold_mu);
  if (live_->collision_hold) return;
  live_->collision_hold = d.detail;
  log::error("{}", d.detail);
  metrics_->set_gauge(metrics::kConnectorCollisionHold, {{"source", binding_->name()}}, 1);
}

}  // namespace harvest::connector
