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
#include <harvest/connector/runtime_impl.hpp>
#include <harvest/connector/settlement.hpp>
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

// Adds a settlement's counts to the binding's counters and to the pass.
void add_counts(metrics::MetricsRecorder& metrics, const std::string& binding,
                const std::vector<Count>& counts, PassSummary& summary) {
  for (const Count& c : counts) {
    const std::string label(to_string(c.label));
    const auto n = static_cast<double>(c.n);
    switch (c.counter) {
      case Counter::kDispatched:
        metrics.increment(metrics::kConnectorDispatched, {{"source", binding}, {"outcome", label}},
                          n);
        summary.acked += c.n;
        break;
      case Counter::kDeadLettered:
        metrics.increment(metrics::kConnectorDeadLettered, {{"source", binding}, {"reason", label}},
                          n);
        summary.dead_lettered += c.n;
        break;
      case Counter::kRetried:
        metrics.increment(metrics::kConnectorRetried, {{"source", binding}, {"reason", label}}, n);
        summary.retried += c.n;
        break;
    }
  }
}

}  // namespace

// ConnectorRuntime is the installed face of Impl (runtime_impl.hpp): every
// call is forwarded, so the header carries no state.

ConnectorRuntime::ConnectorRuntime(std::shared_ptr<const SourceBinding> binding,
                                   std::shared_ptr<EventSource> source, engine::Engine& engine,
                                   std::shared_ptr<metrics::MetricsRecorder> metrics,
                                   IdempotencyMode mode, ConnectorRuntimeConfig config)
    : impl_(std::make_unique<Impl>(std::move(binding), std::move(source), engine,
                                   std::move(metrics), mode, std::move(config))) {}

ConnectorRuntime::~ConnectorRuntime() = default;

ConnectorRuntime& ConnectorRuntime::with_dead_letter_sink(std::shared_ptr<DeadLetterSink> sink) {
  impl_->sink_ = std::move(sink);
  return *this;
}

ConnectorRuntime& ConnectorRuntime::with_replay_store(
    std::shared_ptr<connector_dlq::DeadLetterStore> store) {
  impl_->replays_ = std::move(store);
  return *this;
}

Result<ReplaySummary> ConnectorRuntime::replay_requested() {
  return impl_->replay_requested();
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::run_once() {
  return impl_->run_once();
}

Status ConnectorRuntime::run(std::stop_token stop) {
  return impl_->run(std::move(stop));
}

IdempotencyMode ConnectorRuntime::idempotency_mode() const {
  return impl_->mode_;
}

size_t ConnectorRuntime::stall_threshold() const {
  return impl_->stall_threshold_;
}

const SourceBinding& ConnectorRuntime::binding() const {
  return *impl_->binding_;
}

const CommitTracker& ConnectorRuntime::tracker() const {
  return *impl_->tracker_;
}

const StrikeCounter& ConnectorRuntime::strikes() const {
  return *impl_->strikes_;
}

bool ConnectorRuntime::store_unavailable() const {
  return impl_->outage_->paused();
}

std::chrono::milliseconds ConnectorRuntime::store_probe_delay() const {
  return impl_->outage_->probe_delay();
}

size_t ConnectorRuntime::held() const {
  return impl_->outage_->held();
}

std::optional<std::string> ConnectorRuntime::collision_hold() const {
  return impl_->collision_hold();
}

uint64_t ConnectorRuntime::recoveries() const {
  return impl_->live_->rebuilds.load();
}

BindingStatus ConnectorRuntime::status() const {
  return impl_->status();
}

ConnectorRuntime::Impl::Impl(std::shared_ptr<const SourceBinding> binding,
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

ConnectorRuntime::Impl::~Impl() {
  lag_.reset();
  pool_.reset();
}

Dispatched ConnectorRuntime::Impl::poison(const Message& m, const std::string& key,
                                          DeadLetterReason reason, const std::string& detail,
                                          int attempts) {
  if (binding_->uses_broker_native_dead_letter()) {
    // The broker's redrive policy owns poison: hand it back promptly so the
    // receive count climbs to maxReceiveCount.
    return {Verdict::kHandedBack, reason, true};
  }
  DeadLetter letter{.binding = binding_->name(),
                    .stream = binding_->stream(),
                    .coordinates = render(m.coordinates),
                    .idempotency_key = key,
                    .reason = std::string(to_string(reason)),
                    .detail = detail,
                    .attempts = attempts,
                    .payload = m.payload,
                    .key = m.key,
                    .headers = m.headers,
                    .coordinates_structured = coordinates_json(m.coordinates),
                    .fingerprint = record_fingerprint(m)};
  if (auto w = sink_->write(letter); !w) {
    // The sink lives in the store: an outage holds the message like any other.
    if (is_unavailable(w.error())) return {Verdict::kHold, RetryReason::kStoreUnavailable};
    log::warn("binding '{}': dead-letter write for {} failed ({}); the message will be retried",
              binding_->name(), letter.coordinates, w.error().describe());
    return {Verdict::kRetry, RetryReason::kDeadLetterFailed};
  }
  strikes_->reset(key);
  log::warn("binding '{}': {} dead-lettered as {} after {} attempt(s): {}", binding_->name(),
            letter.coordinates, letter.reason, attempts, detail);
  return {Verdict::kDeadLettered, reason};
}

MappingOutcome ConnectorRuntime::Impl::apply_mapper(const Message& m) const {
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

ConnectorRuntime::Impl::Mapped ConnectorRuntime::Impl::map_one(const Message& m) {
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
    out.verdict = poison(m, key, DeadLetterReason::kUndecodable, mapped.detail, 1);
  } else if (mapped.kind == MappingOutcome::Kind::kRejected) {
    const uint32_t strikes = strikes_->strike(key);
    out.verdict = b.poison_threshold() > 0 && strikes >= b.poison_threshold()
                      ? poison(m, key, DeadLetterReason::kMappingRejected, mapped.detail,
                               static_cast<int>(strikes))
                      : Dispatched{Verdict::kRetry, DeadLetterReason::kMappingRejected, true};
  } else {
    out.message = std::move(mapped.mapped);
    out.ref = to_valid_utf8(render(m.coordinates));
    out.trace = trace_context_of(m);
  }
  return out;
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::Impl::stalled(
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

std::expected<PassSummary, ConnectorError> ConnectorRuntime::Impl::run_once() {
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

BindingStatus ConnectorRuntime::Impl::status() const {
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

std::expected<PassSummary, ConnectorError> ConnectorRuntime::Impl::run_pass() {
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

void ConnectorRuntime::Impl::dispatch_received(const std::vector<Message>& messages,
                                               PassSummary& summary) {
  std::vector<std::optional<Ticket>> tickets(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) tickets[i] = ticket_for(*tracker_, messages[i]);
  dispatch(messages, tickets, summary);
  summary.store_unavailable = outage_->paused();
}

void ConnectorRuntime::Impl::dispatch_received_ahead(PassSummary& summary) {
  auto messages = source_->take_received_ahead();
  summary.received += messages.size();
  if (!messages.empty()) dispatch_received(messages, summary);
}

void ConnectorRuntime::Impl::release_received_ahead(std::string_view why) {
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

void ConnectorRuntime::Impl::forget_revoked() {
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

void ConnectorRuntime::Impl::dispatch(const std::vector<Message>& messages,
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
      mapped[i].verdict = Dispatched{Verdict::kRetry, RetryReason::kTransient};
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

void ConnectorRuntime::Impl::enter_store_unavailable() {
  release_received_ahead("the store is unreachable");
  outage_->enter();
}

bool ConnectorRuntime::Impl::store_answers() {
  return outage_->probed(engine_.probe_store().has_value());
}

void ConnectorRuntime::Impl::settle(const std::vector<Message>& messages,
                                    const std::vector<std::optional<Ticket>>& tickets,
                                    const std::vector<Dispatched>& results, PassSummary& summary) {
  std::vector<Delivery> deliveries(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    deliveries[i] = {tickets[i].has_value(), messages[i].receive_count};
  }
  const SettlementPlan plan = plan_settlement(results, deliveries, source_->redrive_max_receives());
  // In batch order (the tracker's bookkeeping depends on it). For positional
  // sources collect, per partition, the head of the completed prefix to commit.
  std::vector<Message> to_ack;
  std::map<PartitionKey, Message> commits;
  for (size_t i = 0; i < messages.size(); ++i) {
    switch (plan.steps[i]) {
      case Step::kNone:
        break;
      case Step::kAck:
        to_ack.push_back(messages[i]);
        break;
      case Step::kSettle:
        if (auto mark = tracker_->on_settled(*tickets[i])) {
          Message head = messages[i];
          head.coordinates = at_offset(head.coordinates, *mark - 1);
          commits.insert_or_assign(tickets[i]->partition, std::move(head));
        }
        break;
      case Step::kRetry:
        tracker_->on_retried(*tickets[i], source_->abandon_redelivers());
        break;
      case Step::kHold:
        outage_->hold(messages[i], tickets[i]);
        ++summary.held;
        break;
      case Step::kReportCollision:
        hold_on_collision(results[i], summary);
        break;
    }
  }
  add_counts(*metrics_, binding_->name(), plan.counts, summary);
  for (auto& [p, head] : commits) to_ack.push_back(std::move(head));
  bool acked = true;
  if (!to_ack.empty()) {
    if (auto a = source_->ack(to_ack); a) {
      for (const auto& head : to_ack) {
        if (auto at = position_of(head.coordinates)) committed_[at->partition] = at->offset + 1;
      }
    } else {
      acked = false;
      log::warn("binding '{}': ack failed ({}); {} messages will be redelivered and dedupe",
                binding_->name(), a.error().describe(), plan.acked);
    }
  }
  add_counts(*metrics_, binding_->name(), acked ? plan.if_acked : plan.if_ack_failed, summary);
  bool handed = true;
  if (!plan.abandon.empty()) {
    std::vector<Message> to_abandon;
    to_abandon.reserve(plan.abandon.size());
    for (size_t i : plan.abandon) to_abandon.push_back(messages[i]);
    if (auto a = source_->abandon(to_abandon); !a) {
      handed = false;
      log::warn("binding '{}': handing {} messages back failed: {}", binding_->name(),
                to_abandon.size(), a.error().describe());
    }
  }
  add_counts(*metrics_, binding_->name(), handed ? plan.if_handed_back : plan.if_hand_back_failed,
             summary);
  if (plan.enter_store_outage) enter_store_unavailable();
}

}  // namespace harvest::connector
