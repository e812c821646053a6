// The connector's way into the engine (ENG-11): starts and signal-with-starts
// deduplicated by a `conn:` key derived from broker coordinates. Internal to
// harvest: not part of the supported surface (docs/compatibility.md). The
// public Engine refuses any caller's key under the reserved prefix; only the
// connector runtime, through this interface, writes one.
#pragma once

#include <cstdint>
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
  // The fingerprint of the record `key` was derived from, stored with the
  // key; a later start under the key with another fingerprint is a collision.
  std::optional<int64_t> fingerprint;
};

// A signal-with-start on the connector's path: the signal is deduplicated by
// `key`, a derived `conn:` key that replaces the request's idempotency_key.
struct DerivedSignalWithStart {
  SignalWithStartRequest request;
  std::string key;
  std::optional<int64_t> fingerprint;  // as DerivedStart::fingerprint, for the signal
};

// An outcome on the derived-key path. `collision`: the key was already held
// (outcome says kIdempotentReplay, or duplicate_signal, naming the holder)
// but by a message recorded from a different record — a coordinate collision
// (a recreated topic, a new cluster), which the connector must never
// acknowledge as a redelivery.
// `withheld` (with refuse_collisions): not committed, because another
// request of the batch collided; `outcome` means nothing. Send it again.
template <typename Outcome>
struct Derived {
  Outcome outcome;
  bool collision = false;
  bool withheld = false;
};

// Engine::start_batch and signal_with_start_batch for derived keys: one
// outcome per request, in order, each what the request would get alone. A
// key outside the reserved prefix fails its own request (kInternal: a
// connector bug), never the others. `refuse_collisions`: a batch in which a
// request collides commits nothing — the colliding requests come back with
// `collision`, every other one `withheld` (ExecutionStore::start_batch).
class ConnectorStarts {
 public:
  [[nodiscard]] static std::vector<Result<Derived<StartOutcome>>> start_batch(
      Engine& engine, std::vector<DerivedStart> requests, bool refuse_collisions = false);
  [[nodiscard]] static std::vector<Result<Derived<SignalWithStartOutcome>>> signal_with_start_batch(
      Engine& engine, std::vector<DerivedSignalWithStart> requests, bool refuse_collisions = false);
};

}  // namespace harvest::engine::internal
