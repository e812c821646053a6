// KafkaSource's read-ahead buffer and what the poller reports into it:
// messages, partition ends and consumer errors; and the snapshot tests read.
#include <algorithm>

#include <harvest/common/log.hpp>
#include <harvest/kafka/anchor_book.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka {

using detail::footprint;

void KafkaSource::on_message(int32_t partition, int64_t offset, connector::Message message) {
  {
    std::lock_guard lock(mu_);
    auto it = owned_.find(partition);
    if (it == owned_.end()) return;  // revoked meanwhile; the next owner reads it
    if (it->second.last_read && offset <= *it->second.last_read) {
      // Offsets went back with no new assignment: the consumer was reset to
      // the start of a log that replaced the one it read (a topic deleted
      // and recreated, a truncated log). What was acked belongs to the old
      // log: never commit it now (it would skip the new log's first
      // records). The partition starts a new generation, so the runtime
      // forgets the old log's commit state and acks of its messages are
      // dropped.
      log::warn(
          "{}: partition {} went back from offset {} to {} without a reassignment: its log was "
          "replaced (a recreated topic?); the acked prefix of the old log is dropped",
          log_name_, partition, *it->second.last_read, offset);
      it->second = Ownership{.generation = ++next_generation_};
    }
    it->second.last_read = offset;
    anchors_->record_first_read(partition, offset);
    message.generation = it->second.generation;
    buffer_bytes_ += footprint(message);
    buffer_.push_back(std::move(message));
    consumer_error_.reset();  // consumption works again
  }
  ready_.notify_one();
}

void KafkaSource::on_partition_eof(int32_t partition, int64_t offset) {
  // With enable.partition.eof, reaching the end before any message is where
  // the reset policy resolved: the same fact as a first read at `offset`.
  std::lock_guard lock(mu_);
  if (owned_.contains(partition)) anchors_->record_first_read(partition, offset);
}

void KafkaSource::on_consumer_error(Error error, bool fatal) {
  if (fatal) {
    log::error("{}", error.message);
  } else {
    log::warn("{}", error.message);
  }
  {
    std::lock_guard lock(mu_);
    if (fatal) {
      fatal_ = std::move(error);
    } else {
      consumer_error_ = std::move(error);
    }
  }
  ready_.notify_all();
}

bool KafkaSource::read_ahead_full() const {
  return buffer_.size() >= config_.max_buffered() || buffer_bytes_ >= config_.max_buffered_bytes();
}

bool KafkaSource::read_ahead_half() const {
  return buffer_.size() <= config_.max_buffered() / 2 &&
         buffer_bytes_ <= config_.max_buffered_bytes() / 2;
}

void KafkaSource::drop_buffered(const std::vector<int32_t>& partitions) {
  std::erase_if(buffer_, [&](const connector::Message& m) {
    return std::ranges::find(partitions,
                             std::get<connector::KafkaCoordinates>(m.coordinates).partition) !=
           partitions.end();
  });
  buffer_bytes_ = 0;
  for (const auto& m : buffer_) buffer_bytes_ += footprint(m);
  space_.notify_all();
}

bool KafkaSource::fetch_paused() const {
  std::lock_guard lock(mu_);
  return paused_;
}

KafkaSource::Snapshot KafkaSource::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  for (const auto& [p, ownership] : owned_) s.owned.emplace(p, ownership.generation);
  s.anchors = anchors_->all();
  s.floors_committed = floors_committed_;
  s.buffered = buffer_.size();
  s.paused = paused_;
  return s;
}

}  // namespace harvest::kafka
