// ConnectorRuntime::run: passes until stop, stall recovery (rebuilds that
// back off on the stalled partition's own evidence, CON-18) and the drain of
// what the source received ahead when the binding stops (SQS-5).
#include <fmt/format.h>

#include <algorithm>

#include <harvest/common/log.hpp>
#include <harvest/connector/commit_tracker.hpp>
#include <harvest/connector/lag_sampler.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/connector/runtime_impl.hpp>
#include <harvest/connector/store_outage.hpp>

namespace harvest::connector {

Status ConnectorRuntime::Impl::run(std::stop_token stop) {
  auto backoff = config_.idle_backoff;
  const auto max_backoff = std::chrono::milliseconds(30000);
  live_->running = true;
  struct NotRunning {
    Live& live;
    ~NotRunning() { live.running = false; }
  } on_return{*live_};
  while (!stop.stop_requested()) {
    auto pass = run_once();
    if (pass) {
      // Only progress resets the backoff of failed receives and recoveries.
      if (pass->acked + pass->dead_lettered > 0) backoff = config_.idle_backoff;
      if (pass->store_unavailable) {
        (void)config_.clock->sleep_for(outage_->probe_delay(), stop);
      } else if (pass->received + pass->acked + pass->retried + pass->dead_lettered == 0) {
        (void)config_.clock->sleep_for(config_.idle_backoff, stop);
      }
      continue;
    }
    const ConnectorError& e = pass.error();
    if (e.kind == ConnectorErrorKind::kStalled) {
      // Evidence of progress is the stalled partition's committed position
      // having moved since its last rebuild; replays acknowledged in between,
      // and commits on other partitions, moved nothing there. Without it,
      // each further rebuild waits longer (doubling, at most 30 s), so a head
      // that fails for good slows down instead of storming the broker.
      const PartitionKey& stalled_on = e.stall->partition;
      std::optional<int64_t> position;
      if (auto c = committed_.find(stalled_on); c != committed_.end()) position = c->second;
      const auto first_pause = std::max(config_.idle_backoff, std::chrono::milliseconds(1));
      auto previous = rebuilt_.find(stalled_on);
      std::chrono::milliseconds next_pause = first_pause;
      if (previous != rebuilt_.end() && previous->second.committed == position) {
        const auto pause = previous->second.backoff;
        log::warn("{}; rebuilding the source in {} ms (the last rebuild committed nothing on {})",
                  e.message, pause.count(), stalled_on.label());
        if (!config_.clock->sleep_for(pause, stop)) break;
        next_pause = std::min(pause * 2, max_backoff);
      } else {
        log::warn("{}; rebuilding the source", e.message);
      }
      auto recovered = source_->recover();
      if (!recovered) {
        log::warn("binding '{}': recovery failed ({}); retrying in {} ms", binding_->name(),
                  recovered.error().describe(), backoff.count());
        (void)config_.clock->sleep_for(backoff, stop);
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
      // The rebuilt consumer redelivers every partition from its last commit;
      // without this the redelivered offsets would land below a stale
      // in-memory mark, and the next pass would stop on another partition's
      // stale wedge without receiving. Strikes are kept so a repeatedly
      // rejected message still reaches its threshold.
      ++live_->rebuilds;
      rebuilt_[stalled_on] = Rebuilt{position, next_pause};
      metrics_->increment(metrics::kConnectorRecoveries, {{"source", binding_->name()}});
      tracker_->clear();
      outage_->drop_held();
      continue;
    }
    log::warn("{}; retrying in {} ms", e.message, backoff.count());
    (void)config_.clock->sleep_for(backoff, stop);
    backoff = std::min(backoff * 2, max_backoff);
  }
  // Stopping: what the source received ahead is dispatched now (or released
  // with the store down) rather than released unread, which would spend a
  // receive on each (SQS-5: restarts never push a good message toward the
  // redrive policy's DLQ).
  if (source_->holds_received_ahead()) {
    if (outage_->paused()) {
      release_received_ahead("the binding is stopping with the store unreachable");
    } else {
      PassSummary last;
      dispatch_received_ahead(last);
      log::info("binding '{}': stopping; dispatched {} messages received ahead ({} acked)",
                binding_->name(), last.received, last.acked + last.dead_lettered);
    }
  }
  return {};
}

}  // namespace harvest::connector
