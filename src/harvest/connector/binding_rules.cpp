#include <fmt/format.h>

#include <harvest/connector/binding_rules.hpp>

namespace harvest::connector {

namespace {

bool defers_admission(const engine::WorkflowRegistry& r, const std::string& workflow) {
  const auto* def = r.find(workflow);
  return def && def->options.defers_admission();
}

}  // namespace

IdempotencyMode resolve_idempotency_mode(const SourceBinding& b,
                                         const engine::WorkflowRegistry& workflows,
                                         IdempotencyMode requested) {
  if (b.kind() == BindingKind::kSignalsWithStart) return IdempotencyMode::kBrokerCoordinates;
  IdempotencyMode mode =
      requested != IdempotencyMode::kAuto ? requested : b.requested_idempotency_mode();
  if (mode != IdempotencyMode::kAuto) return mode;
  return defers_admission(workflows, b.workflow()) ? IdempotencyMode::kWorkflowId
                                                   : IdempotencyMode::kBrokerCoordinates;
}

std::vector<std::string> binding_refusals(const SourceBinding& b,
                                          const engine::WorkflowRegistry& workflows,
                                          const EventSource* source, IdempotencyMode requested) {
  std::vector<std::string> out;
  const IdempotencyMode asked =
      requested != IdempotencyMode::kAuto ? requested : b.requested_idempotency_mode();
  if (!source) out.push_back(fmt::format("binding '{}' has no source", b.name()));
  if (source && source->stream() != b.stream()) {
    out.push_back(fmt::format(
        "binding '{}' is declared on stream '{}' but its source consumes stream '{}': dead "
        "letters and metrics would name the wrong stream. Declare the binding on '{}', or give "
        "the source the binding's stream",
        b.name(), b.stream(), source->stream(), source->stream()));
  }
  if (!workflows.find(b.workflow())) {
    out.push_back(
        fmt::format("binding '{}' targets workflow '{}', which is not registered: register "
                    "it with .workflows(...) or fix the name",
                    b.name(), b.workflow()));
  }
  if (!b.mapper()) {
    out.push_back(fmt::format(
        "binding '{}' has no mapping function: add .map_json(...) or .map_raw(...)", b.name()));
  }
  if (b.max_in_flight() == 0) {
    out.push_back(
        fmt::format("binding '{}' has max_in_flight(0), which would never dispatch: use 1 "
                    "or more (1 dispatches in broker order)",
                    b.name()));
  }
  if (source && b.uses_broker_native_dead_letter() && !source->dead_letter_destination()) {
    out.push_back(fmt::format(
        "binding '{}' uses broker_native_dead_letter() but its source reports no dead-letter "
        "destination, so poison would be redelivered forever. Kafka has none; an SQS queue "
        "needs a redrive policy (SqsSource::connect probes it; "
        "SqsSourceConfig::has_redrive_policy(true) declares it). Or drop "
        "broker_native_dead_letter() to use the harvest dead-letter table",
        b.name()));
  }
  if (asked == IdempotencyMode::kBrokerCoordinates && b.kind() == BindingKind::kStarts &&
      defers_admission(workflows, b.workflow())) {
    out.push_back(fmt::format(
        "binding '{}' forces idempotency_mode(BrokerCoordinates) on workflow '{}', which has a "
        "deferred-admission policy (throttle, debounce or batch): a deferred start has no "
        "execution id to return for a key. "
        "Use idempotency_mode(WorkflowId), or leave the mode unset to fall back automatically",
        b.name(), b.workflow()));
  }
  const engine::WorkflowDef* def = workflows.find(b.workflow());
  if (def && def->validate_input && b.kind() == BindingKind::kSignalsWithStart &&
      !b.start_input_from_mapper()) {
    if (auto why = def->validate_input(b.entity_start_input())) {
      out.push_back(
          fmt::format("binding '{}' would start runs of workflow '{}' with the input {}, which the "
                      "workflow's input type refuses ({}): give the binding an input it accepts "
                      "(.entity_start_input(...)), or return one from the mapper "
                      "(MappedMessage::start_input) and declare .start_input_from_mapper()",
                      b.name(), b.workflow(), b.entity_start_input().dump(), *why));
    }
  }
  if (!b.unknown_collision_policy().empty()) {
    out.push_back(fmt::format(
        "binding '{}' has on_collision('{}'), which is not a collision policy: use 'hold' (stop "
        "and report), 'dead_letter' or 'dispatch'",
        b.name(), b.unknown_collision_policy()));
  }
  if (b.incarnation_set() && b.incarnation().empty()) {
    out.push_back(fmt::format(
        "binding '{}' has an empty key_incarnation(\"\"): an incarnation names a namespace of "
        "dedupe keys and must not be empty (a date, a cluster name or a ticket id will do); "
        "remove the call to use the default namespace",
        b.name()));
  }
  if (asked == IdempotencyMode::kWorkflowId && b.kind() == BindingKind::kSignalsWithStart) {
    out.push_back(
        fmt::format("binding '{}' is signals_with_start, which always dedupes on broker "
                    "coordinates: remove idempotency_mode(WorkflowId)",
                    b.name()));
  }
  return out;
}

}  // namespace harvest::connector
