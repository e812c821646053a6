// The connector's way into the engine (ENG-11): starts and signal-with-starts
// deduplicated by a `conn:` key derived from broker coordinates. Internal to
// harvest: not part of the supported surface (docs/compatibility.md). The
// public Engine refuses any caller's key under the reserved prefix; only the
// connector runtime, through this interface, writes one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <harvest/engine/engine.hpp>

namespace harvest::engine::internal {

// A start on the connector's path: deduplicated by `key` (a derived `conn:`
// key that replaces the request's idempotency_key), or, when `key` is empty,
// by its workflow_id alone.
struct DerivedStart {
  StartRequest request;
  std::optional<std::string> key;
};

// A signal-with-start on the connector's path: the signal is deduplicated by
// `key`, a derived `conn:` key that replaces the request's idempotency_key.
struct DerivedSignalWithStart {
  SignalWithStartRequest request;
  std::string key;
};

// Engine::start_batch and signal_with_start_batch for derived keys: one
// outcome per request, in order, each what the request would get alone. A
// key outside the reserved prefix fails its own request (kInternal: a
// connector bug), never the others.
class ConnectorStarts {
 public:
  [[nodiscard]] static std::vector<Result<StartOutcome>> start_batch(
      Engine& engine, std::vector<DerivedStart> requests);
  [[nodiscard]] static std::vector<Result<SignalWithStartOutcome>> signal_with_start_batch(
      Engine& engine, std::vector<DerivedSignalWithStart> requests);
};

}  // namespace harvest::engine::internal
