#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/binding_rules.hpp>
#include <harvest/connector/commit_tracker.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/dispatch_pool.hpp>
#include <harvest/connector/fingerprint.hpp>
#include <harvest/connector/lag_sampler.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/connector/runtime_mapped.hpp>
#include <harvest/connector/store_outage.hpp>
#include <harvest/connector/strike_counter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector {

namespace {

// A message with a position in an ordered log is tracked for prefix
// commits (CommitTracker); one without is acked by itself.
std::optional<Ticket> ticket_for(CommitTracker& tracker, const Message& m) {
  auto at = position_of(m.coordinates);
  if (!at) return std::nullopt;
  return tracker.on_receive(at->partition, at->offset, m.generation);
}

}  // namespace

ConnectorRuntime::ConnectorRuntime(std::shared_ptr<const SourceBinding> binding,
                                   std::shared_ptr<EventSource> source, engine::Engine& engine,
                                   std::shared_ptr<metrics::MetricsRecorder> metrics,
                                   IdempotencyMode mode, ConnectorRuntimeConfig config)
    : binding_(std::move(binding)),
      source_(std::move(source)),
      engine_(engine),
      metrics_(metrics ? std::move(metrics) : std::make_shared<metrics::NoopMetrics>()),
      mode_(mode),
      config_(std::move(config)),
      tracker_(std::make_unique<CommitTracker>()),
      strikes_(std::make_unique<StrikeCounter>(binding_->name())),
      outage_(std::make_unique<StoreOutage>(
          binding_->name(), config_.store_probe_initial, config_.store_probe_max,
          config_.clock ? config_.clock : Clock::steady(), metrics_)) {
  if (!config_.clock) config_.clock = Clock::steady();
  if (auto refusals = binding_refusals(*binding_, engine_.workflows(), source_.get(), mode);
      !refusals.empty()) {
    throw ConfigError(fmt::format("{}", fmt::join(refusals, "; ")));
  }
  mode_ = resolve_idempotency_mode(*binding_, engine_.workflows(), mode);
  stall_threshold_ =
      config_.stall_threshold.value_or(std::max<size_t>(4 * binding_->max_in_flight(), 32));
  sink_ = std::make_shared<UnconfiguredDeadLetterSink>(binding_->name());
  pool_ = std::make_unique<DispatchPool>(binding_->max_in_flight());
  const bool ordered =
      binding_->kind() == BindingKind::kSignalsWithStart || binding_->max_in_flight() == 1;
  // Lanes × group size never exceeds max_in_flight, so the bound holds for
  // messages in commit as it does for messages being mapped (CON-19).
  commit_lanes_ = ordered ? 1
                          : std::clamp<size_t>(config_.commit_concurrency, 1,
                                               std::max<size_t>(binding_->max_in_flight(), 1));
  commit_pool_ = std::make_unique<DispatchPool>(commit_lanes_);
  live_ = std::make_unique<Live>();
  subscription_ = source_->subscription_identity();
  lag_ = std::make_unique<LagSampler>(binding_->name(), source_, metrics_,
                                      config_.lag_sample_interval, config_.clock);
  // Every per-binding series exists from the start, so a dashboard or
  // `harvest connectors status` reads 0 rather than "no data".
  const metrics::Labels labels = {{"source", binding_->name()}};
  metrics_->set_gauge(metrics::kConnectorStoreUnavailable, labels, 0);
  metrics_->set_gauge(metrics::kConnectorInFlight, labels, 0);
  metrics_->increment(metrics::kConnectorRecoveries, labels, 0);
  metrics_->set_gauge(metrics::kConnectorCollisionHold, labels, 0);
  metrics_->increment(metrics::kConnectorCollisions, labels, 0);
}

ConnectorRuntime::~ConnectorRuntime() {
  lag_.reset();
  pool_.reset();
}

const CommitTracker& ConnectorRuntime::tracker() const {
  return *tracker_;
}

const StrikeCounter& ConnectorRuntime::strikes() const {
  return *strikes_;
}

bool ConnectorRuntime::store_unavailable() const {
  return outage_->paused();
}

std::chrono::milliseconds ConnectorRuntime::store_probe_delay() const {
  return outage_->probe_delay();
}

size_t ConnectorRuntime::held() const {
  return outage_->held();
}

ConnectorRuntime& ConnectorRuntime::with_dead_letter_sink(std::shared_ptr<DeadLetterSink> sink) {
  sink_ = std::move(sink);
  return *this;
}

metrics::Labels ConnectorRuntime::labels(std::string key, std::string value) const {
  return {{"source", binding_->name()}, {std::move(key), std::move(value)}};
}

ConnectorRuntime::Dispatched ConnectorRuntime::poison(const Message& m, const std::string& key,
                                                      const std::string& reason,
                                                      const std::string& detail, int attempts) {
  if (binding_->uses_broker_native_dead_letter()) {
    // The broker's redrive policy owns poison: hand it back promptly so the
    // receive count climbs to maxReceiveCount.
    return {Verdict::kHandedBack, reason, true};
  }
  DeadLetter letter{.binding = binding_->name(),
                    .stream = binding_->stream(),
                    .coordinates = render(m.coordinates),
                    .idempotency_key = key,
                    .reason = reason,
                    .detail = detail,
                    .attempts = attempts,
                    .payload = m.payload,
                    .key = m.key,
                    .headers = m.headers,
                    .coordinates_structured = coordinates_json(m.coordinates),
                    .fingerprint = record_fingerprint(m)};
  if (auto w = sink_->write(letter); !w) {
    // The sink lives in the store: an outage holds the message like any other.
    if (is_unavailable(w.error())) return {Verdict::kHold, "store_unavailable", false};
    log::warn("binding '{}': dead-letter write for {} failed ({}); the message will be retried",
              binding_->name(), letter.coordinates, w.error().describe());
    return {Verdict::kRetry, "dead_letter_failed", false};
  }
  strikes_->reset(key);
  log::warn("binding '{}': {} dead-lettered as {} after {} attempt(s): {}", binding_->name(),
            letter.coordinates, reason, attempts, detail);
  return {Verdict::kDeadLettered, reason, false};
}

MappingOutcome ConnectorRuntime::apply_mapper(const Message& m) const {
  const SourceBinding& b = *binding_;
  MessageCtx ctx(m, b.stream(), b.name());
  try {
    return b.mapper()(ctx, m.payload);
  } catch (const std::exception& e) {
    return {MappingOutcome::Kind::kRejected, {}, fmt::format("mapping threw: {}", e.what())};
  } catch (...) {
    return {MappingOutcome::Kind::kRejected, {}, "mapping threw a non-standard exception"};
  }
}

ConnectorRuntime::Mapped ConnectorRuntime::map_one(const Message& m) {
  const SourceBinding& b = *binding_;
  Mapped out;
  out.started = config_.clock->now();
  out.key = DedupeKey::derive(b.name(), b.incarnation(), m.coordinates);
  // Only a coordinate key is compared on a hit; a workflow-id binding has none.
  if (mode_ == IdempotencyMode::kBrokerCoordinates) out.fingerprint = record_fingerprint(m);
  // A throw past the mapper's own guard (tests arm it) lands in dispatch()'s backstop.
  HARVEST_FAULT_POINT("connector.map");
  const std::string& key = out.key->value();
  MappingOutcome mapped = apply_mapper(m);
  if (mapped.kind == MappingOutcome::Kind::kUndecodable) {
    out.verdict = poison(m, key, "undecodable", mapped.detail, 1);
  } else if (mapped.kind == MappingOutcome::Kind::kRejected) {
    const uint32_t strikes = strikes_->strike(key);
    out.verdict = b.poison_threshold() > 0 && strikes >= b.poison_threshold()
                      ? poison(m, key, "mapping_rejected", mapped.detail, static_cast<int>(strikes))
                      : Dispatched{Verdict::kRetry, "mapping_rejected", true};
  } else {
    out.message = std::move(mapped.mapped);
    out.ref = to_valid_utf8(render(m.coordinates));
    out.trace = trace_context_of(m);
  }
  return out;
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::stalled(
    const Stall& s, const PassSummary& summary) const {
  return std::unexpected(ConnectorError{
      ConnectorErrorKind::kStalled,
      s.retried_head
          ? fmt::format("binding '{}': partition {} is stalled: offset {} was retried on a "
                        "source that does not redeliver by itself ({} completed behind it)",
                        binding_->name(), s.partition.label(), s.head, s.depth)
          : fmt::format("binding '{}': partition {} is stalled: {} completed offsets held "
                        "behind unsettled offset {} (bound {})",
                        binding_->name(), s.partition.label(), s.depth, s.head, s.bound),
      s, Error{}, summary});
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::run_once() {
  auto pass = run_pass();
  const metrics::Labels labels = {{"source", binding_->name()}};
  metrics_->set_gauge(metrics::kConnectorInFlight, labels, static_cast<double>(outage_->held()));
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  metrics_->set_gauge(metrics::kConnectorLastPass, labels,
                      std::chrono::duration<double>(now).count());
  const PassSummary& done = pass ? *pass : pass.error().summary;
  live_->in_flight = outage_->held();
  live_->store_down = outage_->paused();
  live_->last_pass_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  live_->dispatched += done.acked;
  live_->dead_lettered += done.dead_lettered;
  live_->retried += done.retried;
  if (!pass && pass.error().kind == ConnectorErrorKind::kStalled) ++live_->stalls;
  return pass;
}

BindingStatus ConnectorRuntime::status() const {
  BindingStatus s{.binding = binding_->name(),
                  .kind = binding_->kind() == BindingKind::kStarts ? "start" : "signal",
                  .stream = binding_->stream(),
                  .workflow = binding_->workflow(),
                  .subscription = subscription_,
                  .running = live_->running.load(),
                  .lag = std::nullopt,
                  .in_flight = live_->in_flight.load(),
                  .last_pass = std::nullopt,
                  .stalls = live_->stalls.load(),
                  .rebuilds = live_->rebuilds.load(),
                  .store_available = !live_->store_down.load(),
                  .dispatched = live_->dispatched.load(),
                  .dead_lettered = live_->dead_lettered.load(),
                  .retried = live_->retried.load(),
                  .collisions = live_->collisions.load(),
                  .collision_hold = collision_hold()};
  if (const int64_t lag = lag_->last(); lag >= 0) s.lag = lag;
  if (const int64_t ms = live_->last_pass_ms.load(); ms >= 0) {
    s.last_pass = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  }
  return s;
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::run_pass() {
  PassSummary summary;
  if (!outage_->paused() && source_->holds_received_ahead() && lag_->due()) {
    // A sample is due: what the source received ahead is dispatched first,
    // so no message sits invisible across the sample's broker call.
    dispatch_received_ahead(summary);
    return summary;
  }
  // Lag first: a wedged binding's gauge must keep reporting the work it owes.
  lag_->maybe_sample();
  if (outage_->paused() && !store_answers()) {
    summary.store_unavailable = true;
    return summary;
  }
  if (!outage_->holding()) maybe_replay();
  if (outage_->held() > 0) {
    // What the outage interrupted goes first, in the order it was received:
    // nothing new is taken until it is durable (or held again).
    std::vector<Message> messages;
    std::vector<std::optional<Ticket>> tickets;
    for (auto& h : outage_->take_held()) {
      messages.push_back(std::move(h.message));
      tickets.push_back(std::move(h.ticket));
    }
    dispatch(messages, tickets, summary);
    summary.store_unavailable = outage_->paused();
    return summary;
  }
  // Holding on a coordinate collision: nothing new is taken (nor a stall
  // declared on the partition it holds) until an operator restarts the
  // binding.
  if (collision_hold()) return summary;
  // A wedged binding stops pulling batches it could only drop.
  forget_revoked();
  if (auto s = tracker_->find_stall(stall_threshold_)) return stalled(*s, summary);

  auto batch = source_->receive(std::max<size_t>(config_.max_batch, 1), config_.poll_timeout);
  if (!batch) {
    return std::unexpected(ConnectorError{
        ConnectorErrorKind::kSource,
        fmt::format("binding '{}': receive failed: {}", binding_->name(), batch.error().describe()),
        std::nullopt, batch.error(), summary});
  }
  const std::vector<Message>& messages = *batch;
  summary.received = messages.size();
  if (messages.empty()) return summary;
  dispatch_received(messages, summary);
  // Held messages are not stalled: the store, not the broker, is holding them.
  // Nor is a partition held on a collision.
  if (outage_->holding() || collision_hold()) return summary;
  forget_revoked();
  if (auto s = tracker_->find_stall(stall_threshold_)) return stalled(*s, summary);
  return summary;
}

void ConnectorRuntime::dispatch_received(const std::vector<Message>& messages,
                                         PassSummary& summary) {
  std::vector<std::optional<Ticket>> tickets(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) tickets[i] = ticket_for(*tracker_, messages[i]);
  dispatch(messages, tickets, summary);
  summary.store_unavailable = outage_->paused();
}

void ConnectorRuntime::dispatch_received_ahead(PassSummary& summary) {
  auto messages = source_->take_received_ahead();
  summary.received += messages.size();
  if (!messages.empty()) dispatch_received(messages, summary);
}

void ConnectorRuntime::release_received_ahead(std::string_view why) {
  if (!source_->holds_received_ahead()) return;
  auto messages = source_->take_received_ahead();
  if (messages.empty()) return;
  log::info("binding '{}': {}; releasing {} messages received ahead for redelivery",
            binding_->name(), why, messages.size());
  if (auto a = source_->abandon(messages); !a) {
    log::warn("binding '{}': releasing {} messages received ahead failed: {}", binding_->name(),
              messages.size(), a.error().describe());
  }
}

void ConnectorRuntime::forget_revoked() {
  // A partition another replica owns now is its business: stalling on it
  // would rebuild this consumer and rebalance every replica for nothing.
  const size_t n = tracker_->forget_unowned([this](const PartitionKey& k, uint64_t generation) {
    return source_->owns(k.topic, k.partition, generation);
  });
  if (n > 0) {
    log::debug("binding '{}': forgot {} partition(s) this consumer no longer owns",
               binding_->name(), n);
  }
}

void ConnectorRuntime::dispatch(const std::vector<Message>& messages,
                                const std::vector<std::optional<Ticket>>& tickets,
                                PassSummary& summary) {
  // Map on the pool (≤ max_in_flight at once), then commit in batch order,
  // groups of ≤ max_in_flight, one engine transaction per group.
  metrics_->set_gauge(metrics::kConnectorInFlight, {{"source", binding_->name()}},
                      static_cast<double>(messages.size()));
  std::vector<Mapped> mapped(messages.size());
  pool_->run(messages.size(), [&](size_t i) {
    try {
      mapped[i] = map_one(messages[i]);
    } catch (const std::exception& e) {
      // A dispatch must never take the runtime down; treat as transient.
      log::error("binding '{}': dispatch of {} failed unexpectedly: {}", binding_->name(),
                 render(messages[i].coordinates), e.what());
      mapped[i].verdict = Dispatched{Verdict::kRetry, "transient", false};
    }
  });
  std::vector<Dispatched> results(messages.size());
  std::vector<std::vector<size_t>> groups(1);
  const size_t group_max = std::max<size_t>(binding_->max_in_flight() / commit_lanes_, 1);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (mapped[i].verdict) {
      results[i] = std::move(*mapped[i].verdict);
      continue;
    }
    if (groups.back().size() == group_max) groups.emplace_back();
    groups.back().push_back(i);
  }
  if (groups.back().empty()) groups.pop_back();
  commit_pool_->run(groups.size(),
                    [&](size_t g) { commit_group(messages, mapped, groups[g], results); });
  HARVEST_FAULT_POINT("connector.after_dispatch_before_ack");

  settle(messages, tickets, results, summary);
}

void ConnectorRuntime::enter_store_unavailable() {
  release_received_ahead("the store is unreachable");
  outage_->enter();
}

bool ConnectorRuntime::store_answers() {
  return outage_->probed(engine_.probe_store().has_value());
}

void ConnectorRuntime::settle(const std::vector<Message>& messages,
                              const std::vector<std::optional<Ticket>>& tickets,
                              std::vector<Dispatched>& results, PassSummary& summary) {
  // Settle in batch order. For positional sources collect, per partition,
  // the head of the completed prefix to commit.
  std::vector<Message> to_ack;
  std::vector<size_t> acked_idx;
  std::map<PartitionKey, Message> commits;
  std::vector<Message> to_abandon;
  std::vector<size_t> handed_back;
  size_t unavailable = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    Dispatched& d = results[i];
    switch (d.verdict) {
      case Verdict::kSettled:
      case Verdict::kDeadLettered: {
        // Counted once the ack lands (below): a message whose ack fails is
        // redelivered and counted then, so nothing is counted twice.
        if (tickets[i]) {
          if (auto mark = tracker_->on_settled(*tickets[i])) {
            Message head = m;
            head.coordinates = at_offset(head.coordinates, *mark - 1);
            commits.insert_or_assign(tickets[i]->partition, std::move(head));
          }
        } else {
          to_ack.push_back(m);
        }
        acked_idx.push_back(i);
        break;
      }
      case Verdict::kHandedBack:
        // Counted once it is handed back (below): as dead-lettered on the
        // hand-back after which the broker moves it, as a retry before.
        handed_back.push_back(i);
        to_abandon.push_back(m);
        break;
      case Verdict::kHold:
        // Not the message's fault and not a stall: a positional message is
        // held (unacked) for dispatch once the store answers; a redelivering
        // broker hands the rest back by itself.
        metrics_->increment(metrics::kConnectorRetried, labels("reason", d.reason));
        ++summary.retried;
        ++unavailable;
        if (tickets[i]) {
          outage_->hold(m, tickets[i]);
          ++summary.held;
        }
        break;
      case Verdict::kCollisionHold:
        // Neither acked nor retried: its partition commits nothing past it.
        hold_on_collision(d, summary);
        break;
      case Verdict::kRetry:
        metrics_->increment(metrics::kConnectorRetried, labels("reason", d.reason));
        ++summary.retried;
        if (tickets[i]) tracker_->on_retried(*tickets[i], source_->abandon_redelivers());
        if (d.fast_retry) to_abandon.push_back(m);
        break;
    }
  }
  for (auto& [p, head] : commits) to_ack.push_back(std::move(head));
  if (!to_ack.empty()) {
    if (auto a = source_->ack(to_ack); a) {
      for (const auto& head : to_ack) {
        if (auto at = position_of(head.coordinates)) committed_[at->partition] = at->offset + 1;
      }
    } else {
      // Durable in harvest but not acked: the broker redelivers and the
      // redelivery dedupes to the same execution.
      log::warn("binding '{}': ack failed ({}); {} messages will be redelivered and dedupe",
                binding_->name(), a.error().describe(), acked_idx.size());
      metrics_->increment(metrics::kConnectorRetried, labels("reason", "ack_failed"),
                          static_cast<double>(acked_idx.size()));
      summary.retried += acked_idx.size();
      acked_idx.clear();
    }
  }
  for (size_t i : acked_idx) {
    if (results[i].verdict == Verdict::kDeadLettered) {
      metrics_->increment(metrics::kConnectorDeadLettered, labels("reason", results[i].reason));
      ++summary.dead_lettered;
    } else {
      metrics_->increment(metrics::kConnectorDispatched, labels("outcome", results[i].reason));
      ++summary.acked;
    }
  }
  bool handed = true;
  if (!to_abandon.empty()) {
    if (auto a = source_->abandon(to_abandon); !a) {
      handed = false;
      log::warn("binding '{}': handing {} messages back failed: {}", binding_->name(),
                to_abandon.size(), a.error().describe());
    }
  }
  // Poison the broker's redrive policy owns: one dead letter per message, on
  // the hand-back that reaches maxReceiveCount (the broker moves it on its
  // next receive). Earlier hand-backs, and a hand-back that failed (the
  // message comes back after its visibility timeout), are retries. With the
  // limit unknown, every hand-back counts.
  const auto limit = source_->redrive_max_receives();
  for (size_t i : handed_back) {
    const bool last = handed && (!limit || messages[i].receive_count >= *limit);
    if (last) {
      metrics_->increment(metrics::kConnectorDeadLettered, labels("reason", results[i].reason));
      ++summary.dead_lettered;
    } else {
      metrics_->increment(metrics::kConnectorRetried, labels("reason", results[i].reason));
      ++summary.retried;
    }
  }
  if (unavailable > 0) enter_store_unavailable();
}

}  // namespace harvest::connector
