// ConnectorRuntime's side of connector dead-letter replay: rows an operator
// marked (API, `harvest connector-dead-letters replay`) are picked up here, where
// the binding's mapper lives, and dispatched through the same map and
// engine-commit path a broker message takes.
#include <fmt/format.h>

#include <harvest/common/json.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/commit_tracker.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/connector/runtime_impl.hpp>
#include <harvest/connector/settlement.hpp>
#include <harvest/connector/strike_counter.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::connector {

namespace {

// The coordinates a dead-letter row stored, read back exactly: from the
// structured column (connector/coordinates.hpp's JSON form). A row without
// it, or with one that does not read, is refused: replaying it under made-up
// coordinates would hand the mapper a wrong message.
Result<Coordinates> stored_coordinates(const connector_dlq::StoredDeadLetter& row) {
  if (!row.coordinates_structured) {
    return fail(Error::bad_request(fmt::format(
        "the row's coordinates '{}' were not recorded in structured form and cannot be read "
        "back exactly",
        row.coordinates)));
  }
  auto json = parse_json(*row.coordinates_structured);
  if (!json) return fail(json.error());
  return coordinates_from_json(*json);
}

}  // namespace

void ConnectorRuntime::Impl::maybe_replay() {
  if (!replays_) return;
  const auto now = config_.clock->now();
  if (last_replay_look_ && now - *last_replay_look_ < config_.replay_poll_interval) return;
  last_replay_look_ = now;
  if (auto r = replay_requested(); !r) {
    // The queue waits in the table: the next look tries again.
    log::warn("binding '{}': looking for dead letters to replay failed: {}", binding_->name(),
              r.error().describe());
  }
}

Result<ReplaySummary> ConnectorRuntime::Impl::replay_requested() {
  ReplaySummary summary;
  if (!replays_) return summary;
  auto rows = replays_->claim(binding_->name(), std::max<size_t>(config_.replay_batch, 1));
  if (!rows) return fail(rows.error());
  summary.claimed = rows->size();
  for (const auto& row : *rows) {
    using connector_dlq::ReplayOutcome;
    std::optional<ReplayOutcome> outcome;
    std::string detail;
    std::optional<std::string> execution_id;
    Message m;
    auto coordinates = stored_coordinates(row);
    MappingOutcome mapped{MappingOutcome::Kind::kRejected, {}, {}};
    if (coordinates) {
      m.coordinates = std::move(*coordinates);
      m.payload = row.payload;
      m.key = row.key;
      m.headers = row.headers;  // the mapper sees what it saw the first time
      m.receive_count = row.attempts + 1;
      mapped = apply_mapper(m);
    }
    if (!coordinates) {
      outcome = ReplayOutcome::kDeadLettered;
      detail = fmt::format("replay_refused: {}", coordinates.error().message);
      log::error("binding '{}': dead letter {} cannot be replayed: {}", binding_->name(), row.id,
                 coordinates.error().message);
    } else if (mapped.kind != MappingOutcome::Kind::kMapped) {
      // The operator asked for this one attempt: no strikes, no new row (the
      // original keeps its key); the new reason is recorded on the row.
      outcome = ReplayOutcome::kDeadLettered;
      detail = fmt::format("{}: {}",
                           to_string(mapped.kind == MappingOutcome::Kind::kUndecodable
                                         ? DeadLetterReason::kUndecodable
                                         : DeadLetterReason::kMappingRejected),
                           mapped.detail);
    } else {
      Mapped one;
      // A collided record starts under its coordinate key in the binding's
      // current namespace, with its fingerprint: while another record holds
      // that key (the namespace was not rotated) it collides again and is
      // refused below. Any other replay keeps its original key, so it
      // dedupes against that delivery.
      const bool collided_row = row.reason == to_string(DeadLetterReason::kCoordinateCollision);
      one.key = collided_row
                    ? DedupeKey::derive(binding_->name(), binding_->incarnation(), m.coordinates)
                    : DedupeKey::recorded(row.idempotency_key);
      if (collided_row) one.fingerprint = row.fingerprint;
      one.message = std::move(mapped.mapped);
      one.ref = row.coordinates;
      one.started = config_.clock->now();
      std::vector<Mapped*> group{&one};
      auto committed = commit_to_engine(group);
      const Result<Committed>& c = committed.at(0);
      if (!c) {
        if (!is_permanent(c.error())) {
          ++summary.retried;
          log::warn(
              "binding '{}': replay of dead letter {} failed transiently ({}); it stays "
              "marked",
              binding_->name(), row.id, c.error().describe());
          continue;
        }
        outcome = ReplayOutcome::kDeadLettered;
        detail =
            fmt::format("{}: {}", to_string(DeadLetterReason::kStartRejected), c.error().message);
      } else if (c->collision || c->withheld) {
        outcome = ReplayOutcome::kDeadLettered;
        detail = fmt::format(
            "{}: in binding '{}''s current key_incarnation its key is still held by run {}, "
            "recorded from a different record; give the binding a new key_incarnation, restart "
            "it and replay again",
            to_string(DeadLetterReason::kCoordinateCollision), binding_->name(),
            c->execution_id.value_or("(unknown)"));
      } else if (c->outcome == DispatchOutcome::kIdempotentReplay) {
        outcome = ReplayOutcome::kExisting;
        execution_id = c->execution_id;
      } else if (c->outcome == DispatchOutcome::kDeferred) {
        outcome = ReplayOutcome::kDeferred;
      } else {
        outcome = ReplayOutcome::kStarted;
        execution_id = c->execution_id;
      }
    }
    auto recorded = replays_->record(row.id, *outcome, detail, execution_id);
    if (!recorded) {
      // The start (if any) is durable and keyed: the next look replays the
      // row again, dedupes to the same execution and records it then.
      ++summary.retried;
      log::warn("binding '{}': recording the replay of dead letter {} failed: {}", binding_->name(),
                row.id, recorded.error().describe());
      continue;
    }
    switch (*outcome) {
      case ReplayOutcome::kStarted:
        ++summary.started;
        break;
      case ReplayOutcome::kExisting:
        ++summary.existing;
        break;
      case ReplayOutcome::kDeferred:
        ++summary.deferred;
        break;
      case ReplayOutcome::kDeadLettered:
        ++summary.dead_lettered;
        break;
    }
    log::info("binding '{}': replayed dead letter {} ({}, requested by {}): {}{}", binding_->name(),
              row.id, row.coordinates, row.replay_requested_by.value_or("?"),
              connector_dlq::to_string(*outcome), detail.empty() ? "" : " — " + detail);
  }
  return summary;
}

}  // namespace harvest::connector
