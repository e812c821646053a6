// Broker coordinates: where a message sits, in one place. Every question the
// broker-independent runtime asks of a message's coordinates is answered
// here — how it is rendered and read back, what its dedupe key is derived
// from, how it is stored in a dead-letter row, and whether it has a position
// in an ordered log — so no other file of the runtime tests "is this Kafka".
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>

namespace harvest::connector {

// Position of a record in a Kafka topic.
struct KafkaCoordinates {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  bool operator==(const KafkaCoordinates&) const = default;
};

// Identity of an SQS message. The receipt handle names one receive of it
// (needed to delete or hand it back); the MessageId names the message.
struct SqsCoordinates {
  std::string queue_url;
  std::string message_id;
  std::string receipt_handle;
};

using Coordinates = std::variant<KafkaCoordinates, SqsCoordinates>;

// One partition of an ordered log (a Kafka topic partition).
struct PartitionKey {
  std::string topic;
  int32_t partition;
  auto operator<=>(const PartitionKey&) const = default;
  [[nodiscard]] std::string label() const;  // "topic[3]"
};

// Where a message sits in an ordered log whose acks commit a contiguous
// prefix. Sources whose messages are acked one by one (SQS) have none.
struct Position {
  PartitionKey partition;
  int64_t offset;
};
[[nodiscard]] std::optional<Position> position_of(const Coordinates& c);
// `c` moved to `offset` of its partition (the head a prefix commit names).
// Coordinates without a position are returned unchanged.
[[nodiscard]] Coordinates at_offset(Coordinates c, int64_t offset);

// "topic:partition:offset" for Kafka, "queue_url#message_id" for SQS: the
// form recorded as start_source_ref and shown to operators.
[[nodiscard]] std::string render(const Coordinates& c);
// The exact inverse of render() (the receipt handle, which render() leaves
// out, comes back empty): a Kafka topic name cannot hold '#', so a '#' marks
// the SQS form, split at the last one; otherwise "topic:partition:offset"
// with both numbers in range. Errors: kBadRequest naming what is unreadable.
[[nodiscard]] Result<Coordinates> parse_rendered(std::string_view rendered);

// The structured form a dead-letter row stores:
//   {"kind": "kafka", "topic": ..., "partition": ..., "offset": ...}
//   {"kind": "sqs", "queue_url": ..., "message_id": ...}
// and its inverse (kBadRequest naming the missing or mistyped member).
[[nodiscard]] Json coordinates_json(const Coordinates& c);
[[nodiscard]] Result<Coordinates> coordinates_from_json(const Json& j);

// The message identity the dedupe key is derived from, in order: the kind,
// then its components ("kafka", topic, partition, offset / "sqs", queue URL,
// MessageId). Deployed keys depend on these bytes: never change them.
[[nodiscard]] std::vector<std::string> identity_components(const Coordinates& c);

}  // namespace harvest::connector
