// Connector dedupe keys (CON-8).
//
// A key identifies one broker message within one binding and incarnation:
//   Kafka: topic, partition, offset      SQS: queue URL, MessageId
// (never an SQS MessageDeduplicationId). It is encoded injectively — every
// component length-prefixed — under the reserved `conn:` prefix, and bounded:
// an encoding longer than kMaxInline, or holding a NUL or invalid UTF-8, is
// replaced by its SHA-256 under a distinct prefix, so a pathological
// coordinate can neither collide with another message's key, overflow the
// column, nor be truncated or refused by PostgreSQL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <harvest/connector/event_source.hpp>
#include <harvest/engine/engine.hpp>

namespace harvest::connector {

class DedupeKey {
 public:
  static constexpr size_t kMaxInline = 200;

  [[nodiscard]] static DedupeKey derive(const std::string& binding, const std::string& incarnation,
                                        const Coordinates& coordinates);
  // The key a message starts under when its coordinate key collided and the
  // binding's policy is CollisionPolicy::kDispatch: the coordinate key's
  // components plus the record's fingerprint, so it never equals a
  // coordinate key and a redelivery of the same record finds it again.
  [[nodiscard]] static DedupeKey derive_fingerprinted(const std::string& binding,
                                                      const std::string& incarnation,
                                                      const Coordinates& coordinates,
                                                      int64_t fingerprint);
  // A key this binding derived earlier and recorded (a dead-letter row's
  // idempotency_key): a replay passes it back unchanged, so it dedupes
  // against the original delivery even after a key_incarnation change.
  [[nodiscard]] static DedupeKey recorded(std::string value) { return DedupeKey(std::move(value)); }

  // The key, reserved prefix included, as the engine writes it (ENG-11).
  [[nodiscard]] const std::string& value() const { return value_; }

 private:
  static DedupeKey from_components(const std::string& binding, const std::string& incarnation,
                                   const std::vector<std::string>& parts);
  explicit DedupeKey(std::string v) : value_(std::move(v)) {}
  std::string value_;
};

}  // namespace harvest::connector
