// The rules of one binding, in one place: which dedupe unit it resolves to
// and every reason to refuse it. `ConnectorRuntime`'s constructor and the
// plugin's validation both call these, so a runtime built by hand refuses
// exactly what `HarvestPlugin::build` refuses.
//
// Pure functions of the binding, the registry and the source; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <harvest/connector/binding.hpp>
#include <harvest/connector/event_source.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::connector {

// The dedupe unit the binding uses. `requested` (the runtime's argument)
// overrides the binding's own request unless it is kAuto. A signals-with-
// start binding always dedupes on broker coordinates; an unset mode on a
// target with deferred admission (throttle, debounce, batch) falls back to
// the mapped workflow_id, because a deferred start has no execution id to
// return for a key.
[[nodiscard]] IdempotencyMode resolve_idempotency_mode(
    const SourceBinding& binding, const engine::WorkflowRegistry& workflows,
    IdempotencyMode requested = IdempotencyMode::kAuto);

// Every refusal of this binding on its own, one sentence each naming the
// binding and the fix; empty when it may run. `source` may be null (refused).
[[nodiscard]] std::vector<std::string> binding_refusals(
    const SourceBinding& binding, const engine::WorkflowRegistry& workflows,
    const EventSource* source, IdempotencyMode requested = IdempotencyMode::kAuto);

}  // namespace harvest::connector
