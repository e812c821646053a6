#include <fmt/format.h>

#include <thread>

#include <harvest/connector/mock_source.hpp>

namespace harvest::connector {

MockSource::MockSource(std::string stream, Kind kind)
    : stream_(std::move(stream)), kind_(kind), subscription_("mock:" + stream_) {}

void MockSource::push_kafka(int32_t partition, int64_t offset, std::string payload,
                            std::optional<std::string> key, Headers headers) {
  Message m{KafkaCoordinates{stream_, partition, offset}, std::move(key), std::move(headers),
            std::move(payload)};
  std::lock_guard lock(mu_);
  m.generation = generation_[partition];
  log_[partition].insert_or_assign(offset, m);
  queue_.push_back(std::move(m));
}

std::string MockSource::push_sqs(std::string payload, Headers attributes,
                                 std::optional<std::string> message_id) {
  std::lock_guard lock(mu_);
  std::string id = message_id.value_or(fmt::format("mock-{:08d}", next_id_++));
  queue_.push_back(Message{SqsCoordinates{"mock://" + stream_, id, ""}, std::nullopt,
                           std::move(attributes), std::move(payload), 0});
  return id;
}

MockSource& MockSource::subscription(std::string identity) {
  std::lock_guard lock(mu_);
  subscription_ = std::move(identity);
  return *this;
}
MockSource& MockSource::dead_letter_destination(std::optional<std::string> destination) {
  std::lock_guard lock(mu_);
  dlq_ = std::move(destination);
  return *this;
}
MockSource& MockSource::cluster_id(std::optional<std::string> id) {
  std::lock_guard lock(mu_);
  cluster_id_ = std::move(id);
  return *this;
}
MockSource& MockSource::redrive_max_receives(std::optional<int> receives) {
  std::lock_guard lock(mu_);
  max_receives_ = receives;
  return *this;
}
MockSource& MockSource::recoverable(bool can_recover) {
  std::lock_guard lock(mu_);
  recoverable_ = can_recover;
  return *this;
}
MockSource& MockSource::fail_recoveries(int count) {
  std::lock_guard lock(mu_);
  failing_recoveries_ = count;
  return *this;
}
MockSource& MockSource::fail_acks(bool fail) {
  std::lock_guard lock(mu_);
  fail_acks_ = fail;
  return *this;
}
MockSource& MockSource::clock(std::shared_ptr<Clock> clock) {
  std::lock_guard lock(mu_);
  clock_ = clock ? std::move(clock) : Clock::steady();
  return *this;
}

MockSource& MockSource::lag_delay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  lag_delay_ = delay;
  return *this;
}
MockSource& MockSource::fixed_lag(std::optional<int64_t> lag) {
  std::lock_guard lock(mu_);
  fixed_lag_ = lag;
  return *this;
}

MockSource& MockSource::lag_unanswered(bool unanswered) {
  std::lock_guard lock(mu_);
  lag_unanswered_ = unanswered;
  return *this;
}

MockSource& MockSource::abandon_redelivers(bool redelivers) {
  std::lock_guard lock(mu_);
  redelivers_ = redelivers;
  return *this;
}

MockSource& MockSource::reassign(int32_t partition) {
  std::lock_guard lock(mu_);
  ++generation_[partition];
  revoked_.erase(partition);
  return *this;
}

MockSource& MockSource::revoke(int32_t partition) {
  std::lock_guard lock(mu_);
  revoked_.insert(partition);
  return *this;
}

bool MockSource::owns(const std::string& topic, int32_t partition, uint64_t generation) const {
  std::lock_guard lock(mu_);
  if (topic != stream_ || revoked_.contains(partition)) return false;
  auto it = generation_.find(partition);
  return generation == (it == generation_.end() ? 0 : it->second);
}

bool MockSource::abandon_redelivers() const {
  std::lock_guard lock(mu_);
  return redelivers_.value_or(kind_ == Kind::kRedelivering);
}

void MockSource::expire_in_flight() {
  std::lock_guard lock(mu_);
  for (auto& [id, m] : in_flight_) queue_.push_back(std::move(m));
  in_flight_.clear();
}

std::vector<Message> MockSource::acked() const {
  std::lock_guard lock(mu_);
  return acked_;
}
std::vector<Message> MockSource::abandoned() const {
  std::lock_guard lock(mu_);
  return abandoned_;
}
std::optional<int64_t> MockSource::committed(int32_t partition) const {
  std::lock_guard lock(mu_);
  auto it = committed_.find(partition);
  if (it == committed_.end()) return std::nullopt;
  return it->second;
}
size_t MockSource::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}
int MockSource::recoveries() const {
  std::lock_guard lock(mu_);
  return recoveries_;
}
int MockSource::recover_attempts() const {
  std::lock_guard lock(mu_);
  return recover_attempts_;
}
int MockSource::lag_calls() const {
  std::lock_guard lock(mu_);
  return lag_calls_;
}

Result<std::vector<Message>> MockSource::receive(size_t max, std::chrono::milliseconds) {
  // Never blocks: an empty queue is an idle poll.
  std::lock_guard lock(mu_);
  std::vector<Message> out;
  while (!queue_.empty() && out.size() < max) {
    Message m = std::move(queue_.front());
    queue_.pop_front();
    if (kind_ == Kind::kRedelivering) {
      auto& sqs = std::get<SqsCoordinates>(m.coordinates);
      m.receive_count += 1;
      sqs.receipt_handle = fmt::format("{}#{}", sqs.message_id, m.receive_count);
      in_flight_.insert_or_assign(sqs.message_id, m);
    }
    out.push_back(std::move(m));
  }
  return out;
}

Status MockSource::ack(const std::vector<Message>& messages) {
  std::lock_guard lock(mu_);
  if (fail_acks_) return fail(Error::transient_error("mock ack failure"));
  for (const auto& m : messages) {
    if (const auto* k = std::get_if<KafkaCoordinates>(&m.coordinates)) {
      committed_[k->partition] = k->offset + 1;
    } else {
      in_flight_.erase(std::get<SqsCoordinates>(m.coordinates).message_id);
    }
    acked_.push_back(m);
  }
  return {};
}

Status MockSource::abandon(const std::vector<Message>& messages) {
  std::lock_guard lock(mu_);
  for (const auto& m : messages) {
    abandoned_.push_back(m);
    if (kind_ == Kind::kRedelivering) {
      auto id = std::get<SqsCoordinates>(m.coordinates).message_id;
      if (auto it = in_flight_.find(id); it != in_flight_.end()) {
        queue_.push_back(std::move(it->second));
        in_flight_.erase(it);
      }
    }
  }
  return {};
}

std::optional<std::string> MockSource::dead_letter_destination() const {
  std::lock_guard lock(mu_);
  return dlq_;
}

std::optional<std::string> MockSource::cluster_id() const {
  std::lock_guard lock(mu_);
  return cluster_id_;
}

std::optional<int> MockSource::redrive_max_receives() const {
  std::lock_guard lock(mu_);
  return max_receives_;
}

Result<bool> MockSource::recover() {
  std::lock_guard lock(mu_);
  ++recover_attempts_;
  if (!recoverable_ || kind_ == Kind::kRedelivering) return false;
  if (failing_recoveries_ > 0) {
    --failing_recoveries_;
    return fail(Error::transient_error("mock recovery failure"));
  }
  ++recoveries_;
  // A rebuilt consumer re-reads every partition from its last commit.
  queue_.clear();
  for (const auto& [partition, records] : log_) {
    int64_t from = committed_.contains(partition) ? committed_[partition] : 0;
    for (auto it = records.lower_bound(from); it != records.end(); ++it) {
      queue_.push_back(it->second);
    }
  }
  return true;
}

Result<std::optional<int64_t>> MockSource::lag(std::chrono::steady_clock::time_point deadline) {
  std::chrono::milliseconds delay;
  std::shared_ptr<Clock> clock;
  {
    std::lock_guard lock(mu_);
    ++lag_calls_;
    delay = lag_delay_;
    clock = clock_;
  }
  if (delay.count() > 0) (void)clock->sleep_for(delay);  // plays a slow broker
  std::lock_guard lock(mu_);
  if (lag_unanswered_ || clock->now() > deadline) return std::optional<int64_t>{};
  if (fixed_lag_) return fixed_lag_;
  int64_t owed = 0;
  if (kind_ == Kind::kRedelivering) {
    owed = static_cast<int64_t>(queue_.size() + in_flight_.size());
  } else {
    for (const auto& [partition, records] : log_) {
      if (records.empty()) continue;
      int64_t end = records.rbegin()->first + 1;
      int64_t from =
          committed_.contains(partition) ? committed_.at(partition) : records.begin()->first;
      owed += std::max<int64_t>(0, end - from);
    }
  }
  return std::optional<int64_t>{owed};
}

std::string MockSource::subscription_identity() const {
  std::lock_guard lock(mu_);
  return subscription_;
}

}  // namespace harvest::connector
