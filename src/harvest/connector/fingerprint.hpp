// Record fingerprints: telling a redelivery from a coordinate collision.
//
// A dedupe key derived from broker coordinates (dedupe_key.hpp) names a
// position, and a position in an ordered log is reused when the log is
// recreated (a topic deleted and created again restarts at offset 0) or
// means something else on another cluster. A redelivery of a record carries
// the very bytes it had the first time; a different record at a reused
// position almost never does. So every start and signal keyed by
// coordinates stores a fingerprint of its record beside the key, and a key
// hit compares them: equal is a redelivery, different a collision.
//
// The fingerprint is the first 64 bits of SHA-256 over, each length-prefixed:
// whether the record has a key and the key's bytes, the value, each header's
// name and value in broker order, and the timestamp. Everything a Kafka log
// stores for a record and hands back unchanged on every read — so a genuine
// redelivery always matches — and the timestamp makes a collision of
// byte-identical payloads produced at another time detectable too. 64 bits
// put the chance that two different records at the same position look equal
// at 2^-64 per comparison.
//
// Only messages with a position in an ordered log get one. An SQS MessageId
// is assigned once per message and never reused, so an SQS key cannot
// collide; and an SQS redelivery may carry attributes that changed between
// receives.
#pragma once

#include <cstdint>
#include <optional>

#include <harvest/connector/event_source.hpp>

namespace harvest::connector {

/// The fingerprint of `m` (see the file comment); nullopt for a message
/// without a position in an ordered log (SQS).
[[nodiscard]] std::optional<int64_t> record_fingerprint(const Message& m);

}  // namespace harvest::connector
