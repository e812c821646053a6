// Broker coordinates: where a message sits, in one place. Every question the
// broker-independent runtime asks of a message's coordinates is answered
// here — how it is rendered and read back, what its dedupe key is derived
// from, how it is stored in a dead-letter row, and whether it has a position
// in an ordered log — so no other file of the runtime tests "is this Kafka".
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>

namespace harvest::connector {

/// Position of a record in a Kafka topic.
struct KafkaCoordinates {
  std::string topic;      ///< the topic's name
  int32_t partition = 0;  ///< partition number within the topic
  int64_t offset = 0;     ///< the record's offset within the partition
  /// Member-wise equality.
  bool operator==(const KafkaCoordinates&) const = default;
};

/// Identity of an SQS message. The receipt handle names one receive of it
/// (needed to delete or hand it back); the MessageId names the message.
struct SqsCoordinates {
  std::string queue_url;   ///< the full URL of the queue the message came from
  std::string message_id;  ///< the MessageId SQS assigned to the message
  /// Names this receive of the message; empty in coordinates read back by
  /// parse_rendered or coordinates_from_json.
  std::string receipt_handle;
};

/// Where a message sits, whichever broker it came from.
using Coordinates = std::variant<KafkaCoordinates, SqsCoordinates>;

/// One partition of an ordered log (a Kafka topic partition).
struct PartitionKey {
  std::string topic;  ///< the topic's name
  int32_t partition;  ///< partition number within the topic
  /// Member-wise ordering (topic, then partition), so keys can index maps.
  auto operator<=>(const PartitionKey&) const = default;
  /// The partition as shown in logs and errors: "topic[3]".
  [[nodiscard]] std::string label() const;
};

/// Where a message sits in an ordered log whose acks commit a contiguous
/// prefix. Sources whose messages are acked one by one (SQS) have none.
struct Position {
  PartitionKey partition;  ///< the log partition
  int64_t offset;          ///< the message's offset within it
};
/// The position of `c` in its ordered log: set for Kafka coordinates,
/// nullopt for SQS.
[[nodiscard]] std::optional<Position> position_of(const Coordinates& c);

/// A partition whose acked prefix cannot advance (CON-7): what the connector
/// runtime reports when it answers with a consumer rebuild.
struct Stall {
  PartitionKey partition;  ///< the stalled partition
  size_t depth;            ///< completed offsets held behind the head
  size_t bound;            ///< the threshold, or 0 for a retried head
  /// true: the head was retried on a source that does not redeliver by
  /// itself; false: `depth` reached `bound`.
  bool retried_head;
  int64_t head;  ///< the offset that is not settling
};
/// `c` moved to `offset` of its partition (the head a prefix commit names).
/// Coordinates without a position are returned unchanged.
[[nodiscard]] Coordinates at_offset(Coordinates c, int64_t offset);

/// "topic:partition:offset" for Kafka, "queue_url#message_id" for SQS: the
/// form recorded as start_source_ref and shown to operators.
[[nodiscard]] std::string render(const Coordinates& c);
/// The exact inverse of render() (the receipt handle, which render() leaves
/// out, comes back empty): a Kafka topic name cannot hold '#', so a '#' marks
/// the SQS form, split at the last one; otherwise "topic:partition:offset"
/// with both numbers in range. Errors: kBadRequest naming what is unreadable.
[[nodiscard]] Result<Coordinates> parse_rendered(std::string_view rendered);

/// The structured form a dead-letter row stores:
///   {"kind": "kafka", "topic": ..., "partition": ..., "offset": ...}
///   {"kind": "sqs", "queue_url": ..., "message_id": ...}
/// and its inverse (kBadRequest naming the missing or mistyped member).
[[nodiscard]] Json coordinates_json(const Coordinates& c);
/// The inverse of coordinates_json: the receipt handle comes back empty.
/// Errors: kBadRequest naming the missing or mistyped member, or an unknown
/// "kind".
[[nodiscard]] Result<Coordinates> coordinates_from_json(const Json& j);

/// The message identity the dedupe key is derived from, in order: the kind,
/// then its components ("kafka", topic, partition, offset / "sqs", queue URL,
/// MessageId). Deployed keys depend on these bytes: never change them.
[[nodiscard]] std::vector<std::string> identity_components(const Coordinates& c);

}  // namespace harvest::connector
