#include "connector/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <latch>
#include <map>

#include "common/fault.hpp"
#include "common/log.hpp"
#include "connector/dedupe_key.hpp"

namespace harvest::connector {

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `d` unless stop is requested first.
void pause(std::stop_token st, std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, st, d, [] { return false; });
}

std::optional<int64_t> offset_of(const Message& m) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&m.coordinates)) return k->offset;
  return std::nullopt;
}

std::optional<PartitionKey> partition_of(const Message& m) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&m.coordinates)) {
    return PartitionKey{k->topic, k->partition};
  }
  return std::nullopt;
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
      config_(config),
      strikes_(binding_->name()),
      permits_(static_cast<std::ptrdiff_t>(std::max<size_t>(binding_->max_in_flight(), 1))) {
  if (binding_->max_in_flight() == 0) {
    throw ConfigError(
        fmt::format("binding '{}': max_in_flight must be at least 1", binding_->name()));
  }
  if (!binding_->mapper()) {
    throw ConfigError(
        fmt::format("binding '{}' has no mapping function: call map_json(...) or map_raw(...)",
                    binding_->name()));
  }
  if (mode_ == IdempotencyMode::kAuto) mode_ = binding_->requested_idempotency_mode();
  if (mode_ == IdempotencyMode::kAuto) {
    // A deferred start has no execution id to return for a key, so the
    // engine refuses keys there: dedupe on the mapped workflow_id instead.
    mode_ = binding_->kind() == BindingKind::kStarts &&
                    engine_.has_deferred_admission(binding_->workflow())
                ? IdempotencyMode::kWorkflowId
                : IdempotencyMode::kBrokerCoordinates;
  }
  if (binding_->kind() == BindingKind::kSignalsWithStart) {
    mode_ = IdempotencyMode::kBrokerCoordinates;  // the signal key has no such conflict
  }
  stall_threshold_ =
      config_.stall_threshold.value_or(std::max<size_t>(4 * binding_->max_in_flight(), 32));
  sink_ = std::make_shared<UnconfiguredDeadLetterSink>(binding_->name());
  for (size_t i = 0; i < binding_->max_in_flight(); ++i) {
    dispatchers_.emplace_back([this](std::stop_token st) { dispatch_loop(st); });
  }
  lag_thread_ = std::jthread([this](std::stop_token st) { lag_loop(st); });
}

ConnectorRuntime::~ConnectorRuntime() {
  lag_thread_.request_stop();
  for (auto& t : dispatchers_) t.request_stop();
  lag_thread_ = {};
  dispatchers_.clear();
}

ConnectorRuntime& ConnectorRuntime::with_dead_letter_sink(std::shared_ptr<DeadLetterSink> sink) {
  sink_ = std::move(sink);
  return *this;
}

metrics::Labels ConnectorRuntime::labels(std::string key, std::string value) const {
  return {{"source", binding_->name()}, {std::move(key), std::move(value)}};
}

void ConnectorRuntime::dispatch_loop(std::stop_token st) {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(queue_mu_);
      if (!queue_cv_.wait(lock, st, [&] { return !queue_.empty(); })) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

ConnectorRuntime::Dispatched ConnectorRuntime::poison(const Message& m, const std::string& key,
                                                      const std::string& reason,
                                                      const std::string& detail, int attempts) {
  if (binding_->uses_broker_native_dead_letter()) {
    // The broker's redrive policy owns poison: hand it back promptly so the
    // receive count climbs to maxReceiveCount.
    return {Verdict::kHandedBack, reason, true};
  }
  DeadLetter letter{
      binding_->name(), binding_->stream(), render(m.coordinates), key, reason, detail,
      attempts,         m.payload};
  if (auto w = sink_->write(letter); !w) {
    log::warn("binding '{}': dead-letter write for {} failed ({}); the message will be retried",
              binding_->name(), letter.coordinates, w.error().describe());
    return {Verdict::kRetry, "dead_letter_failed", false};
  }
  strikes_.reset(key);
  return {Verdict::kDeadLettered, reason, false};
}

ConnectorRuntime::Dispatched ConnectorRuntime::dispatch(const Message& m) {
  const SourceBinding& b = *binding_;
  const DedupeKey key = DedupeKey::derive(b.name(), b.incarnation(), m.coordinates);
  MessageCtx ctx(m, b.stream(), b.name());
  MappingOutcome mapped;
  try {
    mapped = b.mapper()(ctx, m.payload);
  } catch (const std::exception& e) {
    mapped = {MappingOutcome::Kind::kRejected, {}, fmt::format("mapping threw: {}", e.what())};
  } catch (...) {
    mapped = {MappingOutcome::Kind::kRejected, {}, "mapping threw a non-standard exception"};
  }
  if (mapped.kind == MappingOutcome::Kind::kUndecodable) {
    return poison(m, key.value(), "undecodable", mapped.detail, 1);
  }
  if (mapped.kind == MappingOutcome::Kind::kRejected) {
    uint32_t strikes = strikes_.strike(key.value());
    if (b.poison_threshold() > 0 && strikes >= b.poison_threshold()) {
      return poison(m, key.value(), "mapping_rejected", mapped.detail, static_cast<int>(strikes));
    }
    return {Verdict::kRetry, "mapping_rejected", true};
  }

  const std::string ref = to_valid_utf8(render(m.coordinates));
  Result<std::string> outcome = [&]() -> Result<std::string> {
    try {
      if (b.kind() == BindingKind::kSignalsWithStart) {
        engine::SignalWithStartRequest req{.workflow = b.workflow(),
                                           .workflow_id = mapped.mapped.workflow_id,
                                           .signal = b.signal(),
                                           .payload = std::move(mapped.mapped.payload),
                                           .source = engine::StartSource::kBroker,
                                           .source_ref = ref};
        auto r = engine_.signal_with_start_derived(std::move(req), key.pass());
        if (!r) return fail(r.error());
        return std::string(r->duplicate_signal ? "idempotent_replay" : "dispatched");
      }
      engine::StartRequest req{.workflow = b.workflow(),
                               .workflow_id = mapped.mapped.workflow_id,
                               .input = std::move(mapped.mapped.payload),
                               .source = engine::StartSource::kBroker,
                               .source_ref = ref};
      auto r = mode_ == IdempotencyMode::kBrokerCoordinates
                   ? engine_.start_derived(std::move(req), key.pass())
                   : engine_.start(req);
      if (!r) return fail(r.error());
      switch (r->kind) {
        case engine::StartOutcomeKind::kStarted:
          return std::string("dispatched");
        case engine::StartOutcomeKind::kIdempotentReplay:
          return std::string("idempotent_replay");
        case engine::StartOutcomeKind::kDeferred:
          return std::string("deferred");
      }
      return std::string("dispatched");
    } catch (const nlohmann::json::exception& e) {
      // The mapped payload cannot be serialised (e.g. raw bytes that are not
      // UTF-8): the message's fault, deterministically.
      return fail(
          Error::bad_request(fmt::format("mapped payload is not valid JSON text: {}", e.what())));
    }
  }();
  if (!outcome) {
    if (is_permanent(outcome.error())) {
      return poison(m, key.value(), "start_rejected", outcome.error().message, 1);
    }
    // Not the message's fault (database down, pool exhausted): leave it
    // unacked and let the broker redeliver at its own pace.
    log::warn("binding '{}': transient dispatch failure for {}: {}", b.name(), ref,
              outcome.error().describe());
    return {Verdict::kRetry, "transient", false};
  }
  strikes_.reset(key.value());
  return {Verdict::kSettled, *outcome, false};
}

std::expected<PassSummary, ConnectorError> ConnectorRuntime::run_once() {
  PassSummary summary;
  auto stalled = [&](const Stall& s) {
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
  };
  // Lag first: a wedged binding's gauge must keep reporting the work it owes.
  maybe_sample_lag();
  // A wedged binding stops pulling batches it could only drop.
  if (auto s = tracker_.find_stall(stall_threshold_)) return stalled(*s);

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

  std::vector<std::optional<Ticket>> tickets(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (auto p = partition_of(messages[i]))
      tickets[i] = tracker_.on_receive(*p, *offset_of(messages[i]));
  }

  std::vector<Dispatched> results(messages.size());
  std::latch done(static_cast<std::ptrdiff_t>(messages.size()));
  for (size_t i = 0; i < messages.size(); ++i) {
    permits_.acquire();
    {
      std::lock_guard lock(queue_mu_);
      queue_.push_back([this, i, &messages, &results, &done] {
        try {
          auto t0 = Clock::now();
          results[i] = dispatch(messages[i]);
          metrics_->observe(metrics::kConnectorDispatchSeconds, {{"source", binding_->name()}},
                            std::chrono::duration<double>(Clock::now() - t0).count());
        } catch (const std::exception& e) {
          // A dispatch must never take the runtime down; treat as transient.
          log::error("binding '{}': dispatch of {} failed unexpectedly: {}", binding_->name(),
                     render(messages[i].coordinates), e.what());
          results[i] = {Verdict::kRetry, "transient", false};
        } catch (...) {
          log::error("binding '{}': dispatch of {} failed with a non-standard exception",
                     binding_->name(), render(messages[i].coordinates));
          results[i] = {Verdict::kRetry, "transient", false};
        }
        permits_.release();
        done.count_down();
      });
    }
    queue_cv_.notify_one();
  }
  done.wait();
  HARVEST_FAULT_POINT("connector.after_dispatch_before_ack");

  // Settle in batch order. For positional sources collect, per partition,
  // the head of the completed prefix to commit.
  std::vector<Message> to_ack;
  std::vector<size_t> acked_idx;
  std::map<PartitionKey, Message> commits;
  std::vector<Message> to_abandon;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    Dispatched& d = results[i];
    switch (d.verdict) {
      case Verdict::kSettled:
      case Verdict::kDeadLettered: {
        if (d.verdict == Verdict::kSettled) {
          metrics_->increment(metrics::kConnectorDispatched, labels("outcome", d.reason));
        } else {
          metrics_->increment(metrics::kConnectorDeadLettered, labels("reason", d.reason));
        }
        if (tickets[i]) {
          if (auto mark = tracker_.on_settled(*tickets[i])) {
            Message head = m;
            std::get<KafkaCoordinates>(head.coordinates).offset = *mark - 1;
            commits.insert_or_assign(tickets[i]->partition, std::move(head));
          }
        } else {
          to_ack.push_back(m);
        }
        acked_idx.push_back(i);
        break;
      }
      case Verdict::kHandedBack:
        metrics_->increment(metrics::kConnectorDeadLettered, labels("reason", d.reason));
        to_abandon.push_back(m);
        ++summary.dead_lettered;
        break;
      case Verdict::kRetry:
        metrics_->increment(metrics::kConnectorRetried, labels("reason", d.reason));
        if (tickets[i]) tracker_.on_retried(*tickets[i], source_->abandon_redelivers());
        if (d.fast_retry) to_abandon.push_back(m);
        ++summary.retried;
        break;
    }
  }
  for (auto& [p, head] : commits) to_ack.push_back(std::move(head));
  if (!to_ack.empty()) {
    if (auto a = source_->ack(to_ack); !a) {
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
      ++summary.dead_lettered;
    } else {
      ++summary.acked;
    }
  }
  if (!to_abandon.empty()) {
    if (auto a = source_->abandon(to_abandon); !a) {
      log::warn("binding '{}': handing {} messages back failed: {}", binding_->name(),
                to_abandon.size(), a.error().describe());
    }
  }
  if (auto s = tracker_.find_stall(stall_threshold_)) return stalled(*s);
  return summary;
}

void ConnectorRuntime::maybe_sample_lag() {
  std::unique_lock lock(lag_mu_);
  // An abandoned sample still running blocks the next one; the interval
  // counts from its completion.
  if (lag_running_ || lag_requested_ || Clock::now() < lag_next_due_) return;
  lag_requested_ = true;
  uint64_t epoch = lag_epoch_;
  lag_cv_.notify_all();
  bool finished =
      lag_cv_.wait_for(lock, config_.lag_sample_interval, [&] { return lag_epoch_ != epoch; });
  if (!finished) {
    log::warn(
        "binding '{}': connector lag sample exceeded its budget of {} ms and was abandoned; "
        "widen lag_sample_interval or reduce what a sample costs",
        binding_->name(), config_.lag_sample_interval.count());
    return;
  }
  if (lag_value_) {
    metrics_->set_gauge(metrics::kConnectorLag, {{"source", binding_->name()}},
                        static_cast<double>(*lag_value_));
  }
}

void ConnectorRuntime::lag_loop(std::stop_token st) {
  while (true) {
    std::unique_lock lock(lag_mu_);
    if (!lag_cv_.wait(lock, st, [&] { return lag_requested_; })) return;
    lag_requested_ = false;
    lag_running_ = true;
    uint64_t epoch = lag_epoch_;
    lock.unlock();
    auto deadline = Clock::now() + config_.lag_sample_interval;
    auto r = source_->lag(deadline);
    lock.lock();
    lag_running_ = false;
    lag_next_due_ = Clock::now() + config_.lag_sample_interval;
    // A sample that finished past its budget was already abandoned by the
    // pass: its value must not reach the gauge.
    bool in_budget = Clock::now() <= deadline;
    lag_value_ = (r && in_budget) ? *r : std::nullopt;
    if (!r) log::warn("binding '{}': lag sample failed: {}", binding_->name(), r.error().describe());
    lag_epoch_ = epoch + 1;
    lag_cv_.notify_all();
  }
}

Status ConnectorRuntime::run(std::stop_token stop) {
  auto backoff = config_.idle_backoff;
  const auto max_backoff = std::chrono::milliseconds(30000);
  while (!stop.stop_requested()) {
    auto pass = run_once();
    if (pass) {
      // Only progress resets the backoff: a pass whose every message failed
      // (database down) must not turn stall recovery into a rebuild loop.
      if (pass->acked + pass->dead_lettered > 0) backoff = config_.idle_backoff;
      if (pass->received == 0) pause(stop, config_.idle_backoff);
      continue;
    }
    const ConnectorError& e = pass.error();
    if (e.kind == ConnectorErrorKind::kStalled) {
      log::warn("{}; rebuilding the source", e.message);
      auto recovered = source_->recover();
      if (!recovered) {
        log::warn("binding '{}': recovery failed ({}); retrying in {} ms", binding_->name(),
                  recovered.error().describe(), backoff.count());
        pause(stop, backoff);
        backoff = std::min(backoff * 2, max_backoff);
        continue;
      }
      if (!*recovered) {
        std::string msg = fmt::format(
            "{}. The source cannot rebuild itself, so binding '{}' is stopping rather than "
            "retrying forever: restart the process, or use a source that implements recover()",
            e.message, binding_->name());
        log::error("{}", msg);
        return fail(Error::internal(msg));
      }
      // The rebuilt consumer redelivers from the last commit; without this the
      // redelivered offsets would land below a stale in-memory mark. Strikes
      // are kept so a repeatedly rejected message still reaches its threshold.
      tracker_.clear(e.stall->partition);
      // A pass that settled nothing before stalling (a transient outage):
      // pause before pulling again, so rebuilds slow down instead of storming
      // the consumer group.
      if (e.summary.acked + e.summary.dead_lettered == 0) {
        pause(stop, backoff);
        backoff = std::min(backoff * 2, max_backoff);
      }
      continue;
    }
    log::warn("{}; retrying in {} ms", e.message, backoff.count());
    pause(stop, backoff);
    backoff = std::min(backoff * 2, max_backoff);
  }
  return {};
}

}  // namespace harvest::connector
