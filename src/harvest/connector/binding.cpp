#include <harvest/connector/binding.hpp>

namespace harvest::connector {

std::string_view to_string(IdempotencyMode mode) {
  switch (mode) {
    case IdempotencyMode::kAuto:
      return "auto";
    case IdempotencyMode::kBrokerCoordinates:
      return "broker_coordinates";
    case IdempotencyMode::kWorkflowId:
      return "workflow_id";
  }
  return "auto";
}

std::string_view to_string(CollisionPolicy policy) {
  switch (policy) {
    case CollisionPolicy::kHold:
      return "hold";
    case CollisionPolicy::kDeadLetter:
      return "dead_letter";
    case CollisionPolicy::kDispatch:
      return "dispatch";
  }
  return "hold";
}

std::optional<CollisionPolicy> collision_policy_named(std::string_view name) {
  for (auto p :
       {CollisionPolicy::kHold, CollisionPolicy::kDeadLetter, CollisionPolicy::kDispatch}) {
    if (to_string(p) == name) return p;
  }
  return std::nullopt;
}

SourceBinding::SourceBinding(BindingKind kind, std::string name, std::string stream,
                             std::string workflow, std::string signal)
    : kind_(kind),
      name_(std::move(name)),
      stream_(std::move(stream)),
      workflow_(std::move(workflow)),
      signal_(std::move(signal)) {}

SourceBinding SourceBinding::starts(std::string binding, std::string stream, std::string workflow) {
  return SourceBinding(BindingKind::kStarts, std::move(binding), std::move(stream),
                       std::move(workflow), "");
}

SourceBinding SourceBinding::signals_with_start(std::string binding, std::string stream,
                                                std::string workflow, std::string signal) {
  return SourceBinding(BindingKind::kSignalsWithStart, std::move(binding), std::move(stream),
                       std::move(workflow), std::move(signal));
}

MappingOutcome SourceBinding::from_result(MapResult r) {
  if (!r) return {MappingOutcome::Kind::kRejected, {}, std::move(r.error())};
  if (r->workflow_id.empty()) {
    return {MappingOutcome::Kind::kRejected, {}, "mapping returned an empty workflow_id"};
  }
  return {MappingOutcome::Kind::kMapped, std::move(*r), {}};
}

}  // namespace harvest::connector
