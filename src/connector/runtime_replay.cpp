// ConnectorRuntime's side of connector dead-letter replay (issue 15): rows an
// operator marked (API, `harvest connector-dlq replay`) are picked up here,
// where the binding's mapper lives, and dispatched through the same map and
// engine-commit path a broker message takes.
#include <fmt/format.h>

#include <regex>

#include "common/log.hpp"
#include "connector/runtime.hpp"

namespace harvest::connector {

namespace {

// The coordinates a dead-letter row recorded (render()): "queue_url#id"
// for SQS (a Kafka topic name cannot hold '#'), "topic:partition:offset" for
// Kafka. A form that parses as neither is kept whole as the topic, so the
// mapper still sees what was recorded.
Coordinates parse_coordinates(const std::string& rendered) {
  if (auto hash = rendered.rfind('#'); hash != std::string::npos) {
    return SqsCoordinates{rendered.substr(0, hash), rendered.substr(hash + 1), ""};
  }
  static const std::regex kKafka(R"(^(.*):(-?\d{1,10}):(-?\d{1,19})$)");
  std::smatch m;
  if (std::regex_match(rendered, m, kKafka)) {
    try {
      return KafkaCoordinates{m[1].str(), static_cast<int32_t>(std::stol(m[2].str())),
                              std::stoll(m[3].str())};
    } catch (const std::exception&) {
      // Out of range: fall through to the whole string.
    }
  }
  return KafkaCoordinates{rendered, 0, 0};
}

}  // namespace

ConnectorRuntime& ConnectorRuntime::with_replay_store(
    std::shared_ptr<connector_dlq::DeadLetterStore> store) {
  replays_ = std::move(store);
  return *this;
}

void ConnectorRuntime::maybe_replay() {
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

Result<ReplaySummary> ConnectorRuntime::replay_requested() {
  ReplaySummary summary;
  if (!replays_) return summary;
  auto rows = replays_->claim(binding_->name(), std::max<size_t>(config_.replay_batch, 1));
  if (!rows) return fail(rows.error());
  summary.claimed = rows->size();
  for (const auto& row : *rows) {
    Message m;
    m.coordinates = parse_coordinates(row.coordinates);
    m.payload = row.payload;
    m.receive_count = row.attempts + 1;

    using connector_dlq::ReplayOutcome;
    std::optional<ReplayOutcome> outcome;
    std::string detail;
    std::optional<std::string> execution_id;
    MappingOutcome mapped = apply_mapper(m);
    if (mapped.kind != MappingOutcome::Kind::kMapped) {
      // The operator asked for this one attempt: no strikes, no new row (the
      // original keeps its key); the new reason is recorded on the row.
      outcome = ReplayOutcome::kDeadLettered;
      detail = fmt::format(
          "{}: {}",
          mapped.kind == MappingOutcome::Kind::kUndecodable ? "undecodable" : "mapping_rejected",
          mapped.detail);
    } else {
      Mapped one;
      one.key = DedupeKey::recorded(row.idempotency_key);
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
        detail = fmt::format("start_rejected: {}", c.error().message);
      } else if (c->outcome == "idempotent_replay") {
        outcome = ReplayOutcome::kExisting;
        execution_id = c->execution_id;
      } else if (c->outcome == "deferred") {
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
