#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <memory>

#include <harvest/common/log.hpp>
#include <harvest/kafka/broker_calls.hpp>

namespace harvest::kafka::detail {

ErrorKind kind_of(RdKafka::ErrorCode code) {
  switch (code) {
    case RdKafka::ERR__TRANSPORT:
    case RdKafka::ERR__RESOLVE:
    case RdKafka::ERR__ALL_BROKERS_DOWN:
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR__TIMED_OUT_QUEUE:
    case RdKafka::ERR__WAIT_COORD:
    case RdKafka::ERR__STATE:
    case RdKafka::ERR__UNKNOWN_PARTITION:
    case RdKafka::ERR__PARTIAL:
    case RdKafka::ERR__IN_PROGRESS:
    case RdKafka::ERR__ASSIGNMENT_LOST:
    case RdKafka::ERR_REQUEST_TIMED_OUT:
    case RdKafka::ERR_NETWORK_EXCEPTION:
    case RdKafka::ERR_LEADER_NOT_AVAILABLE:
    case RdKafka::ERR_NOT_LEADER_FOR_PARTITION:
    case RdKafka::ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RdKafka::ERR_COORDINATOR_NOT_AVAILABLE:
    case RdKafka::ERR_NOT_COORDINATOR:
    case RdKafka::ERR_ILLEGAL_GENERATION:
    case RdKafka::ERR_UNKNOWN_MEMBER_ID:
    case RdKafka::ERR_REBALANCE_IN_PROGRESS:
    case RdKafka::ERR_FENCED_LEADER_EPOCH:
    case RdKafka::ERR_UNKNOWN_LEADER_EPOCH:
    case RdKafka::ERR_BROKER_NOT_AVAILABLE:
    case RdKafka::ERR_NOT_ENOUGH_REPLICAS:
    case RdKafka::ERR_THROTTLING_QUOTA_EXCEEDED:
      return ErrorKind::kTransient;
    case RdKafka::ERR__AUTHENTICATION:
    case RdKafka::ERR__UNKNOWN_TOPIC:
    case RdKafka::ERR__UNKNOWN_GROUP:
    case RdKafka::ERR__INVALID_ARG:
    case RdKafka::ERR__NOT_CONFIGURED:
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR_TOPIC_AUTHORIZATION_FAILED:
    case RdKafka::ERR_GROUP_AUTHORIZATION_FAILED:
    case RdKafka::ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RdKafka::ERR_SASL_AUTHENTICATION_FAILED:
    case RdKafka::ERR_INVALID_GROUP_ID:
      return ErrorKind::kConfig;
    default:
      return ErrorKind::kInternal;
  }
}

Error to_error(RdKafka::ErrorCode code, const std::string& context) {
  return {kind_of(code), fmt::format("{}: {}", context, RdKafka::err2str(code))};
}

namespace {

CallFailure failure(RdKafka::ErrorCode code, const std::string& context) {
  return {code, fmt::format("{}: {}", context, RdKafka::err2str(code))};
}

int to_ms(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::max<int64_t>(timeout.count(), 0));
}

}  // namespace

TopicPartitions::TopicPartitions(const std::string& topic, const std::vector<int32_t>& partitions,
                                 int64_t offset) {
  list_.reserve(partitions.size());
  for (int32_t p : partitions) list_.push_back(RdKafka::TopicPartition::create(topic, p, offset));
}

TopicPartitions::TopicPartitions(const std::string& topic,
                                 const std::map<int32_t, int64_t>& offsets) {
  list_.reserve(offsets.size());
  for (const auto& [p, offset] : offsets) {
    list_.push_back(RdKafka::TopicPartition::create(topic, p, offset));
  }
}

TopicPartitions::~TopicPartitions() {
  RdKafka::TopicPartition::destroy(list_);
}

std::vector<int32_t> TopicPartitions::partitions() const {
  std::vector<int32_t> out;
  out.reserve(list_.size());
  for (const auto* tp : list_) out.push_back(tp->partition());
  return out;
}

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

CallResult<void> commit_offsets(RdKafka::KafkaConsumer& consumer, const std::string& topic,
                                const std::map<int32_t, int64_t>& offsets,
                                std::chrono::milliseconds timeout) {
  if (offsets.empty()) return {};
  rd_kafka_t* rk = consumer.c_ptr();
  using List = std::unique_ptr<rd_kafka_topic_partition_list_t,
                               decltype(&rd_kafka_topic_partition_list_destroy)>;
  List list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())),
            &rd_kafka_topic_partition_list_destroy);
  for (const auto& [p, offset] : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = offset;
  }
  // A private queue: the result comes back here as an OFFSET_COMMIT event
  // (the event API ignores the callback), never through the consumer's
  // offset_commit_cb, and an answer arriving after we gave up is dropped with
  // the queue.
  std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> queue(
      rd_kafka_queue_new(rk), &rd_kafka_queue_destroy);
  const auto code = static_cast<RdKafka::ErrorCode>(
      rd_kafka_commit_queue(rk, list.get(), queue.get(), nullptr, nullptr));
  if (code != RdKafka::ERR_NO_ERROR) return std::unexpected(failure(code, "offset commit"));

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const int left = remaining_ms(deadline);
    std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)> ev(
        rd_kafka_queue_poll(queue.get(), left), &rd_kafka_event_destroy);
    if (!ev) {
      return std::unexpected(
          failure(RdKafka::ERR__TIMED_OUT,
                  fmt::format("offset commit unanswered after {} ms", to_ms(timeout))));
    }
    if (rd_kafka_event_type(ev.get()) != RD_KAFKA_EVENT_OFFSET_COMMIT) {
      if (left == 0) {
        return std::unexpected(failure(RdKafka::ERR__TIMED_OUT, "offset commit"));
      }
      continue;
    }
    const auto overall = static_cast<RdKafka::ErrorCode>(rd_kafka_event_error(ev.get()));
    std::string refused;
    if (const auto* result = rd_kafka_event_topic_partition_list(ev.get())) {
      for (int i = 0; i < result->cnt; ++i) {
        if (result->elems[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
        refused += fmt::format(" [partition {} offset {}: {}]", result->elems[i].partition,
                               result->elems[i].offset, rd_kafka_err2str(result->elems[i].err));
      }
    }
    if (overall != RdKafka::ERR_NO_ERROR) {
      return std::unexpected(failure(overall, "offset commit" + refused));
    }
    if (!refused.empty()) {
      return std::unexpected(
          CallFailure{RdKafka::ERR_UNKNOWN, "offset commit refused for" + refused});
    }
    return {};
  }
}

CallResult<std::map<int32_t, int64_t>> committed_offsets(RdKafka::KafkaConsumer& consumer,
                                                         const std::string& topic,
                                                         const std::vector<int32_t>& partitions,
                                                         std::chrono::milliseconds timeout) {
  std::map<int32_t, int64_t> out;
  if (partitions.empty()) return out;
  TopicPartitions tps(topic, partitions, RdKafka::Topic::OFFSET_INVALID);
  const auto code = consumer.committed(tps.get(), to_ms(timeout));
  if (code != RdKafka::ERR_NO_ERROR) {
    return std::unexpected(failure(code, "committed offset query"));
  }
  for (const auto* tp : tps.get()) {
    if (tp->err() != RdKafka::ERR_NO_ERROR) {
      return std::unexpected(failure(
          tp->err(), fmt::format("committed offset query for partition {}", tp->partition())));
    }
    if (tp->offset() >= 0) out.emplace(tp->partition(), tp->offset());
  }
  return out;
}

CallResult<std::vector<int32_t>> topic_partitions(RdKafka::Handle& handle, const std::string& topic,
                                                  std::chrono::milliseconds timeout) {
  std::string errstr;
  std::unique_ptr<RdKafka::Topic> rkt(RdKafka::Topic::create(&handle, topic, nullptr, errstr));
  if (!rkt) {
    return std::unexpected(CallFailure{RdKafka::ERR__INVALID_ARG, "topic handle: " + errstr});
  }
  RdKafka::Metadata* raw = nullptr;
  const auto code = handle.metadata(false, rkt.get(), &raw, to_ms(timeout));
  std::unique_ptr<RdKafka::Metadata> md(raw);
  if (code != RdKafka::ERR_NO_ERROR) return std::unexpected(failure(code, "metadata request"));
  for (const auto* t : *md->topics()) {
    if (t->topic() != topic) continue;
    if (t->err() != RdKafka::ERR_NO_ERROR) {
      return std::unexpected(failure(t->err(), fmt::format("metadata for topic '{}'", topic)));
    }
    std::vector<int32_t> out;
    for (const auto* p : *t->partitions()) out.push_back(p->id());
    std::sort(out.begin(), out.end());
    return out;
  }
  return std::unexpected(
      failure(RdKafka::ERR_UNKNOWN_TOPIC_OR_PART, fmt::format("metadata for topic '{}'", topic)));
}

CallResult<std::map<int32_t, int64_t>> watermarks(RdKafka::Handle& handle, const std::string& topic,
                                                  const std::vector<int32_t>& partitions,
                                                  Watermark which,
                                                  std::chrono::milliseconds timeout) {
  std::map<int32_t, int64_t> out;
  if (partitions.empty()) return out;
  // ListOffsets' special timestamps: -1 the end of the log, -2 its start.
  const int64_t ts = which == Watermark::kHigh ? -1 : -2;
  TopicPartitions tps(topic, partitions, ts);
  const auto code = handle.offsetsForTimes(tps.get(), to_ms(timeout));
  if (code != RdKafka::ERR_NO_ERROR) return std::unexpected(failure(code, "watermark query"));
  for (const auto* tp : tps.get()) {
    if (tp->err() != RdKafka::ERR_NO_ERROR || tp->offset() < 0) {
      return std::unexpected(
          failure(tp->err() != RdKafka::ERR_NO_ERROR ? tp->err() : RdKafka::ERR__NO_OFFSET,
                  fmt::format("watermark query for partition {}", tp->partition())));
    }
    out.emplace(tp->partition(), tp->offset());
  }
  return out;
}

bool close_consumer(RdKafka::KafkaConsumer& consumer,
                    std::chrono::steady_clock::time_point deadline, const std::string& who) {
  rd_kafka_t* rk = consumer.c_ptr();
  std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> queue(
      rd_kafka_queue_new(rk), &rd_kafka_queue_destroy);
  if (rd_kafka_error_t* e = rd_kafka_consumer_close_queue(rk, queue.get()); e != nullptr) {
    log::warn("{}: close: {}", who, rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return false;
  }
  constexpr int kSliceMs = 100;
  while (rd_kafka_consumer_closed(rk) == 0) {
    const int left = remaining_ms(deadline);
    if (left == 0) {
      log::warn(
          "{}: the consumer had not finished closing by its close timeout (the broker is not "
          "answering); releasing it, the group drops this member at its session timeout",
          who);
      return false;
    }
    // Serves what the close forwards here: rebalance callbacks (the final
    // revocation and its commit), errors and logs.
    rd_kafka_queue_poll_callback(queue.get(), std::min(left, kSliceMs));
  }
  return true;
}

}  // namespace harvest::kafka::detail
