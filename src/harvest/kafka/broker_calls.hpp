// Internal to harvest_kafka: librdkafka calls bounded by a timeout, the
// translation of librdkafka error codes into harvest's ErrorKind, and RAII
// for librdkafka's TopicPartition vectors. No librdkafka type leaves the
// module; this header is included by the module's .cpp files only.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>

namespace harvest::kafka::detail {

// The retry policy of a librdkafka error: broker availability, timeouts and
// group churn are transient; authentication/authorisation, an unknown topic
// and invalid arguments are configuration; anything else is internal.
[[nodiscard]] ErrorKind kind_of(RdKafka::ErrorCode code);
[[nodiscard]] Error to_error(RdKafka::ErrorCode code, const std::string& context);

// A failed call, keeping the librdkafka code so callers can tell a timeout
// from a refusal before translating it with `to_error`.
struct CallFailure {
  RdKafka::ErrorCode code = RdKafka::ERR_UNKNOWN;
  std::string message;
  [[nodiscard]] bool timed_out() const { return code == RdKafka::ERR__TIMED_OUT; }
  [[nodiscard]] Error error() const { return {kind_of(code), message}; }
};
template <typename T>
using CallResult = std::expected<T, CallFailure>;

// Owns the TopicPartition objects of a librdkafka partition vector.
class TopicPartitions {
 public:
  TopicPartitions() = default;
  // One entry per partition of `topic`, each with `offset`.
  TopicPartitions(const std::string& topic, const std::vector<int32_t>& partitions, int64_t offset);
  // One entry per (partition, offset) of `offsets`.
  TopicPartitions(const std::string& topic, const std::map<int32_t, int64_t>& offsets);
  ~TopicPartitions();
  TopicPartitions(const TopicPartitions&) = delete;
  TopicPartitions& operator=(const TopicPartitions&) = delete;

  std::vector<RdKafka::TopicPartition*>& get() { return list_; }
  [[nodiscard]] bool empty() const { return list_.empty(); }
  [[nodiscard]] std::vector<int32_t> partitions() const;

 private:
  std::vector<RdKafka::TopicPartition*> list_;
};

// Milliseconds left until `deadline`, rounded up, at least 0.
[[nodiscard]] int remaining_ms(std::chrono::steady_clock::time_point deadline);

// Closes `consumer` (leaves the group, serving the callbacks the close
// triggers on this thread) and waits for it at most until `deadline`.
// consumer->close() waits without bound: against a broker that accepts
// connections but never answers (a frozen process, a half-dead host) it
// blocked for minutes. This goes through rd_kafka_consumer_close_queue
// instead. Returns false when the close had not finished by the deadline; the
// caller then destroys the handle without a further close (the C++ wrapper's
// destructor does), and the group drops the member at its session timeout.
[[nodiscard]] bool close_consumer(RdKafka::KafkaConsumer& consumer,
                                  std::chrono::steady_clock::time_point deadline,
                                  const std::string& who);

// Commits `offsets` (next offset to read, per partition of `topic`) and waits
// for the broker's answer at most `timeout`. Unlike commitSync, whose wait is
// unbounded, this goes through rd_kafka_commit_queue on a private queue, so a
// stuck coordinator costs the caller `timeout`, not the socket timeout. A
// per-partition refusal fails the whole call, naming the partitions.
[[nodiscard]] CallResult<void> commit_offsets(RdKafka::KafkaConsumer& consumer,
                                              const std::string& topic,
                                              const std::map<int32_t, int64_t>& offsets,
                                              std::chrono::milliseconds timeout);

// The group's committed offset for each of `partitions`; partitions with no
// commit are omitted.
[[nodiscard]] CallResult<std::map<int32_t, int64_t>> committed_offsets(
    RdKafka::KafkaConsumer& consumer, const std::string& topic,
    const std::vector<int32_t>& partitions, std::chrono::milliseconds timeout);

// Every partition id of `topic`, from a metadata request.
[[nodiscard]] CallResult<std::vector<int32_t>> topic_partitions(RdKafka::Handle& handle,
                                                                const std::string& topic,
                                                                std::chrono::milliseconds timeout);

enum class Watermark { kLow, kHigh };
// The low or high watermark of each of `partitions`. Uses offsetsForTimes
// with the special timestamps -2/-1 because in librdkafka 2.0.2
// query_watermark_offsets does not honour its timeout (it can loop until the
// broker answers: librdkafka #2588, fixed in 2.3.0 by #4460), while
// rd_kafka_offsets_for_times serves its reply queue with the remaining time.
[[nodiscard]] CallResult<std::map<int32_t, int64_t>> watermarks(
    RdKafka::Handle& handle, const std::string& topic, const std::vector<int32_t>& partitions,
    Watermark which, std::chrono::milliseconds timeout);

}  // namespace harvest::kafka::detail
