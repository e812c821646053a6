#include "kafka/kafka_source.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <stop_token>
#include <thread>

#include "common/log.hpp"
#include "kafka/broker_calls.hpp"

namespace harvest::kafka {
namespace {

std::atomic<uint64_t> instances{0};

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// How long one consume() call blocks. It bounds the poller's reaction time
// to a stop request and to buffer space freeing up (resume), and keeps
// librdkafka polled far more often than any max.poll.interval.ms.
constexpr int kPollSliceMs = 100;
// Cap on error events drained from the lag handle per sample.
constexpr int kMaxLagEventsDrained = 1000;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void log_librdkafka(const RdKafka::Event& event, const std::string& who) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_LOG: {
      const auto sev = event.severity();
      if (sev <= RdKafka::Event::EVENT_SEVERITY_ERROR) {
        log::error("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else if (sev == RdKafka::Event::EVENT_SEVERITY_WARNING) {
        log::warn("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else if (sev <= RdKafka::Event::EVENT_SEVERITY_INFO) {
        log::info("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else {
        log::debug("librdkafka {} {}: {}", who, event.fac(), event.str());
      }
      break;
    }
    case RdKafka::Event::EVENT_ERROR:
      log::warn("librdkafka {}: {}: {}", who, RdKafka::err2str(event.err()), event.str());
      break;
    default:
      break;
  }
}

// Routes the lag handle's librdkafka logs and errors to the harvest log.
// Stateless and static, because librdkafka may log from its own threads
// until the handle is fully destroyed.
class LagHandleEvents final : public RdKafka::EventCb {
 public:
  void event_cb(RdKafka::Event& event) override { log_librdkafka(event, "lag handle"); }
};
LagHandleEvents lag_handle_events;

Result<std::unique_ptr<RdKafka::Conf>> make_conf(
    const std::map<std::string, std::string>& properties, const std::string& who) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  for (const auto& [key, value] : properties) {
    // The value is left out of the message: it may be a credential.
    if (conf->set(key, value, errstr) != RdKafka::Conf::CONF_OK) {
      return fail(Error::config(
          fmt::format("{}: librdkafka rejected property '{}': {}", who, key, errstr)));
    }
  }
  return conf;
}

template <typename T>
Status set_callback(RdKafka::Conf& conf, const char* name, T* cb) {
  std::string errstr;
  if (conf.set(name, cb, errstr) != RdKafka::Conf::CONF_OK) {
    return fail(Error::internal(fmt::format("setting librdkafka {}: {}", name, errstr)));
  }
  return {};
}

connector::Message to_message(RdKafka::Message& m, const std::string& topic) {
  connector::Message out;
  out.coordinates = connector::KafkaCoordinates{topic, m.partition(), m.offset()};
  if (m.key_pointer() != nullptr) {
    out.key.emplace(static_cast<const char*>(m.key_pointer()), m.key_len());
  }
  if (RdKafka::Headers* headers = m.headers(); headers != nullptr) {
    for (const auto& h : headers->get_all()) {
      out.headers.emplace_back(
          h.key(), h.value() != nullptr
                       ? std::string(static_cast<const char*>(h.value()), h.value_size())
                       : std::string());
    }
  }
  if (m.payload() != nullptr) out.payload.assign(static_cast<const char*>(m.payload()), m.len());
  return out;
}

std::vector<int32_t> partition_ids(const std::vector<RdKafka::TopicPartition*>& tps,
                                   const std::string& topic) {
  std::vector<int32_t> out;
  for (const auto* tp : tps) {
    if (tp->topic() == topic) out.push_back(tp->partition());
  }
  return out;
}

}  // namespace

// One consumer incarnation: the librdkafka consumer, its callbacks and the
// poller thread that serves it. recover() replaces the whole Session.
//
// Lifecycle: create() (consumer built, not subscribed) -> start() (subscribe,
// poller running) -> shutdown() (poller joined, group left, consumer closed).
// start/shutdown are called from the runtime's thread; the callbacks run on
// the poller thread, or on the shutting-down thread once the poller is gone.
class KafkaSource::Session final : public RdKafka::RebalanceCb,
                                   public RdKafka::OffsetCommitCb,
                                   public RdKafka::EventCb {
 public:
  static Result<std::unique_ptr<Session>> create(KafkaSource& source) {
    std::unique_ptr<Session> session(new Session(source));
    const std::string& who = source.log_name_;
    auto conf = make_conf(source.properties_, who);
    if (!conf) return fail(conf.error());
    for (auto status :
         {set_callback<RdKafka::RebalanceCb>(**conf, "rebalance_cb", session.get()),
          set_callback<RdKafka::OffsetCommitCb>(**conf, "offset_commit_cb", session.get()),
          set_callback<RdKafka::EventCb>(**conf, "event_cb", session.get())}) {
      if (!status) return fail(status.error());
    }
    std::string errstr;
    session->consumer_.reset(RdKafka::KafkaConsumer::create(conf->get(), errstr));
    if (!session->consumer_) {
      return fail(Error::config(fmt::format("{}: creating the consumer: {}", who, errstr)));
    }
    return session;
  }

  ~Session() override { shutdown(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  [[nodiscard]] bool started() const { return started_; }
  RdKafka::KafkaConsumer& consumer() { return *consumer_; }

  [[nodiscard]] Status start() {
    if (started_) return {};
    const auto code = consumer_->subscribe({source_.config_.topic()});
    if (code != RdKafka::ERR_NO_ERROR) {
      return fail(detail::to_error(code, source_.log_name_ + ": subscribe"));
    }
    started_ = true;
    poller_ = std::jthread([this](std::stop_token stop) { poll_loop(stop); });
    return {};
  }

  // Stops the poller, leaves the group and closes the consumer. Idempotent.
  void shutdown() {
    if (closed_ || !consumer_) return;
    closed_ = true;
    if (poller_.joinable()) {
      poller_.request_stop();
      poller_.join();
    }
    std::string fatal_reason;
    const bool fatal = consumer_->fatal_error(fatal_reason) != RdKafka::ERR_NO_ERROR;
    // A consumer in fatal state has no membership left to hand back, and its
    // consume() returns at once: draining it would only spin.
    if (started_ && !fatal) {
      // librdkafka #4527 (fixed in 2.4.0 by #4528; we build on 2.0.2): with a
      // cooperative assignor, close() can hang forever in WAIT_ASSIGN_CALL
      // when an assignment is processed while closing. The workaround given on
      // that issue: unsubscribe, serve the queue until the revocation has run
      // and nothing is assigned, then close. Serving the
      // queue also runs on_revoked, which commits the acked prefix.
      if (const auto code = consumer_->unsubscribe(); code != RdKafka::ERR_NO_ERROR) {
        log::warn("{}: unsubscribe: {}", source_.log_name_, RdKafka::err2str(code));
      }
      const auto deadline = SteadyClock::now() + source_.config_.close_timeout();
      bool drained = false;
      do {
        std::unique_ptr<RdKafka::Message> dropped(consumer_->consume(kPollSliceMs));
        detail::TopicPartitions assigned;
        consumer_->assignment(assigned.get());
        drained = assigned.empty();
      } while (!drained && SteadyClock::now() < deadline);
      if (!drained) {
        log::warn(
            "{}: assignment not released within {} ms of unsubscribe; closing "
            "anyway",
            source_.log_name_, source_.config_.close_timeout().count());
      }
    }
    if (const auto code = consumer_->close(); code != RdKafka::ERR_NO_ERROR) {
      log::warn("{}: close: {}", source_.log_name_, RdKafka::err2str(code));
    }
  }

  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    const auto ids = partition_ids(partitions, source_.config_.topic());
    // Eager assignors (range, roundrobin) hand over the whole assignment at
    // each rebalance; cooperative ones (cooperative-sticky) only the delta,
    // and require the incremental calls.
    const bool cooperative = consumer->rebalance_protocol() == "COOPERATIVE";
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      // Ownership first: the first message of the new generation can only be
      // fetched after the assign below, on this same thread.
      source_.on_assigned(ids);
      if (cooperative) {
        std::unique_ptr<RdKafka::Error> e(consumer->incremental_assign(partitions));
        if (e) log::error("{}: incremental_assign: {}", source_.log_name_, e->str());
      } else if (const auto code = consumer->assign(partitions); code != RdKafka::ERR_NO_ERROR) {
        log::error("{}: assign: {}", source_.log_name_, RdKafka::err2str(code));
      }
      // A partition may come back with a stale pause flag from an earlier
      // assignment; make it match the buffer's current state either way.
      if (source_.fetch_paused()) {
        consumer->pause(partitions);
      } else {
        consumer->resume(partitions);
      }
      // Cooperative rebalances also call in with an empty delta.
      if (!ids.empty()) log::info("{}: assigned partitions {}", source_.log_name_, ids);
    } else if (err == RdKafka::ERR__REVOKE_PARTITIONS) {
      const bool lost = consumer->assignment_lost();
      source_.on_revoked(*consumer, ids, lost);
      if (cooperative) {
        std::unique_ptr<RdKafka::Error> e(consumer->incremental_unassign(partitions));
        if (e) log::error("{}: incremental_unassign: {}", source_.log_name_, e->str());
      } else {
        consumer->unassign();
      }
      if (!ids.empty()) {
        log::info("{}: {} partitions {}", source_.log_name_, lost ? "lost" : "revoked", ids);
      }
    } else {
      log::error("{}: rebalance failed: {}; dropping the assignment", source_.log_name_,
                 RdKafka::err2str(err));
      std::vector<int32_t> all;
      for (const auto& [p, gen] : source_.snapshot().owned) all.push_back(p);
      source_.on_revoked(*consumer, all, /*lost=*/true);
      consumer->unassign();
    }
  }

  // Results of ack()'s asynchronous commits, served by consume() on the
  // poller thread. A failed commit is not retried: the next ack commits a
  // higher offset, and recover()/revocation commit synchronously.
  void offset_commit_cb(RdKafka::ErrorCode err,
                        std::vector<RdKafka::TopicPartition*>& offsets) override {
    if (err == RdKafka::ERR__NO_OFFSET) return;
    bool any_partition_failed = false;
    for (const auto* tp : offsets) {
      if (tp->err() == RdKafka::ERR_NO_ERROR) continue;
      any_partition_failed = true;
      log::warn("{}: offset commit of partition {} at {} failed: {}", source_.log_name_,
                tp->partition(), tp->offset(), RdKafka::err2str(tp->err()));
    }
    if (err != RdKafka::ERR_NO_ERROR && !any_partition_failed) {
      log::warn("{}: offset commit failed: {}", source_.log_name_, RdKafka::err2str(err));
    }
  }

  void event_cb(RdKafka::Event& event) override {
    if (event.type() == RdKafka::Event::EVENT_ERROR && event.fatal()) {
      std::string reason;
      const auto code = consumer_ ? consumer_->fatal_error(reason) : event.err();
      source_.on_consumer_error(
          detail::to_error(code, fmt::format("{}: fatal librdkafka error ({})", source_.log_name_,
                                             reason.empty() ? event.str() : reason)),
          /*fatal=*/true);
      return;
    }
    log_librdkafka(event, source_.log_name_);
  }

 private:
  explicit Session(KafkaSource& source) : source_(source) {}

  void poll_loop(const std::stop_token& stop) {
    const std::string& topic = source_.config_.topic();
    while (!stop.stop_requested()) {
      std::unique_ptr<RdKafka::Message> m(consumer_->consume(kPollSliceMs));
      switch (m->err()) {
        case RdKafka::ERR_NO_ERROR:
          if (m->topic_name() == topic) {
            source_.on_message(m->partition(), m->offset(), to_message(*m, topic));
          }
          break;
        case RdKafka::ERR__PARTITION_EOF:
          source_.on_partition_eof(m->partition(), m->offset());
          break;
        case RdKafka::ERR__TIMED_OUT:
          break;
        case RdKafka::ERR__FATAL: {
          // The consumer is unusable from here on; receive() rebuilds it.
          std::string reason;
          const auto code = consumer_->fatal_error(reason);
          source_.on_consumer_error(
              detail::to_error(
                  code, fmt::format("{}: fatal librdkafka error ({})", source_.log_name_, reason)),
              /*fatal=*/true);
          return;
        }
        default:
          source_.on_consumer_error(
              detail::to_error(
                  m->err(), fmt::format("{}: consumer error ({})", source_.log_name_, m->errstr())),
              /*fatal=*/false);
          break;
      }
      apply_backpressure();
    }
  }

  // Pauses every assigned partition when the read-ahead buffer is full and
  // resumes them at half. librdkafka keeps serving the group while paused
  // (heartbeats, rebalances, max.poll.interval.ms). pause() bumps the
  // partition's version barrier at once, so messages already prefetched are
  // discarded rather than delivered, and fetching restarts from the last
  // message handed to us on resume: nothing is lost or repeated.
  void apply_backpressure() {
    bool pause = false;
    bool resume = false;
    {
      std::lock_guard lock(source_.mu_);
      const size_t cap = source_.config_.max_buffered();
      if (!source_.paused_ && source_.buffer_.size() >= cap) {
        source_.paused_ = pause = true;
      } else if (source_.paused_ && source_.buffer_.size() <= cap / 2) {
        source_.paused_ = false;
        resume = true;
      }
    }
    if (!pause && !resume) return;
    detail::TopicPartitions assigned;
    consumer_->assignment(assigned.get());
    if (assigned.empty()) return;
    const auto code = pause ? consumer_->pause(assigned.get()) : consumer_->resume(assigned.get());
    if (code != RdKafka::ERR_NO_ERROR) {
      log::warn("{}: {}: {}", source_.log_name_, pause ? "pause" : "resume",
                RdKafka::err2str(code));
    }
  }

  KafkaSource& source_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  bool started_ = false;
  bool closed_ = false;
  // Declared last: stopped and joined (in shutdown) before the rest goes.
  std::jthread poller_;
};

Result<std::shared_ptr<KafkaSource>> KafkaSource::connect(const KafkaSourceConfig& config) {
  if (config.topic().empty()) {
    return fail(Error::config("KafkaSourceConfig: topic must not be empty"));
  }
  if (config.effective_group().empty()) {
    return fail(Error::config("KafkaSourceConfig: group (group.id) must not be empty"));
  }
  if (config.effective_brokers().empty()) {
    return fail(Error::config("KafkaSourceConfig: brokers (bootstrap.servers) must not be empty"));
  }
  auto source = std::make_shared<KafkaSource>(Passkey{}, config);
  for (const auto& [key, value] : config.properties()) {
    if ((key == "enable.auto.commit" || key == "enable.auto.offset.store") &&
        lower(value) != "false") {
      log::warn(
          "{}: ignoring {}={}: harvest commits an offset only after the "
          "runtime acks the message, so it is forced to false",
          source->log_name_, key, value);
    }
  }
  auto session = Session::create(*source);
  if (!session) return fail(session.error());
  source->session_ = std::move(*session);
  return source;
}

KafkaSource::KafkaSource(Passkey, KafkaSourceConfig config)
    : config_(std::move(config)),
      properties_(config_.effective_properties()),
      identity_(kafka::subscription_identity(config_)),
      log_name_(fmt::format("KafkaSource#{} {}", ++instances, identity_)),
      reset_(config_.offset_reset()) {}

KafkaSource::~KafkaSource() {
  close();
}

void KafkaSource::close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  ready_.notify_all();
  if (session_) {
    session_->shutdown();
    session_.reset();
  }
  std::lock_guard lag_lock(lag_mu_);
  if (lag_handle_) {
    lag_handle_->close();
    lag_handle_.reset();
  }
}

Status KafkaSource::ensure_session() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return fail(Error::internal(log_name_ + " is closed"));
  }
  if (!session_) {
    auto session = Session::create(*this);
    if (!session) return fail(session.error());
    session_ = std::move(*session);
  }
  return session_->start();
}

void KafkaSource::on_assigned(const std::vector<int32_t>& partitions) {
  std::lock_guard lock(mu_);
  for (int32_t p : partitions) owned_[p] = Ownership{.generation = ++next_generation_};
  // Read-ahead from an earlier generation of these partitions is refetched
  // from the committed offset under the new one.
  std::erase_if(buffer_, [&](const connector::Message& m) {
    return std::ranges::find(partitions,
                             std::get<connector::KafkaCoordinates>(m.coordinates).partition) !=
           partitions.end();
  });
}

void KafkaSource::on_revoked(RdKafka::KafkaConsumer& consumer,
                             const std::vector<int32_t>& partitions, bool lost) {
  std::lock_guard commit_lock(commit_mu_);
  std::map<int32_t, int64_t> final_prefix;
  {
    std::lock_guard lock(mu_);
    for (int32_t p : partitions) {
      auto it = owned_.find(p);
      if (it != owned_.end() && it->second.acked_next) final_prefix[p] = *it->second.acked_next;
    }
  }
  // The acked prefix may still be travelling as an async commit; make it
  // durable before the partitions are handed to their next owner. A lost
  // assignment (session expired) is already someone else's: its commit
  // would be refused, and must not be attempted.
  if (!lost && !final_prefix.empty()) {
    if (auto r =
            detail::commit_offsets(consumer, config_.topic(), final_prefix, config_.sync_timeout());
        !r) {
      log::warn("{}: final commit of revoked partitions failed: {}", log_name_,
                r.error().error().describe());
    }
  }
  std::lock_guard lock(mu_);
  for (int32_t p : partitions) owned_.erase(p);
  std::erase_if(buffer_, [&](const connector::Message& m) {
    return std::ranges::find(partitions,
                             std::get<connector::KafkaCoordinates>(m.coordinates).partition) !=
           partitions.end();
  });
}

void KafkaSource::on_message(int32_t partition, int64_t offset, connector::Message message) {
  {
    std::lock_guard lock(mu_);
    auto it = owned_.find(partition);
    if (it == owned_.end()) return;  // revoked meanwhile; the next owner reads it
    anchors_.record_first_read(partition, offset);
    message.generation = it->second.generation;
    buffer_.push_back(std::move(message));
    consumer_error_.reset();  // consumption works again
  }
  ready_.notify_one();
}

void KafkaSource::on_partition_eof(int32_t partition, int64_t offset) {
  // With enable.partition.eof, reaching the end before any message is where
  // the reset policy resolved: the same fact as a first read at `offset`.
  std::lock_guard lock(mu_);
  if (owned_.contains(partition)) anchors_.record_first_read(partition, offset);
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

bool KafkaSource::fetch_paused() const {
  std::lock_guard lock(mu_);
  return paused_;
}

Result<std::vector<connector::Message>> KafkaSource::receive(size_t max, milliseconds timeout) {
  std::vector<connector::Message> batch;
  if (max == 0) return batch;
  if (auto started = ensure_session(); !started) return fail(started.error());
  {
    std::unique_lock lock(mu_);
    ready_.wait_for(lock, timeout,
                    [&] { return !buffer_.empty() || fatal_ || consumer_error_ || closed_; });
    if (fatal_) {
      Error e = std::move(*fatal_);
      fatal_.reset();
      lock.unlock();
      rebuild_after_fatal();
      return fail(Error::transient_error(e.message + "; consumer rebuilt"));
    }
    while (batch.size() < max && !buffer_.empty()) {
      batch.push_back(std::move(buffer_.front()));
      buffer_.pop_front();
    }
    if (batch.empty() && consumer_error_) {
      Error e = std::move(*consumer_error_);
      consumer_error_.reset();
      return fail(std::move(e));
    }
  }
  // KAF-4: a crash between here and the first ack must not let a replacement
  // re-resolve `latest` past records this batch already holds.
  if (reset_ == OffsetReset::kLatest) commit_pending_floors();
  return batch;
}

void KafkaSource::rebuild_after_fatal() {
  {
    // The membership died with the consumer: nothing it held is ours to
    // commit, and its read-ahead is refetched by whoever owns it next.
    std::lock_guard lock(mu_);
    owned_.clear();
    buffer_.clear();
    paused_ = false;
    consumer_error_.reset();
  }
  if (session_) {
    session_->shutdown();
    session_.reset();
  }
  // The next receive creates and starts a fresh consumer (ensure_session).
}

void KafkaSource::commit_pending_floors() {
  std::set<int32_t> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [p, anchor] : anchors_.all()) {
      if (owned_.contains(p) && !floors_committed_.contains(p)) pending.insert(p);
    }
  }
  if (pending.empty()) return;
  auto settled = commit_anchors(pending);
  if (!settled) {
    log::warn(
        "{}: eager commit of the latest floor for partitions {} failed ({}); "
        "retrying on the next receive",
        log_name_, pending, settled.error().describe());
    return;
  }
  std::lock_guard lock(mu_);
  floors_committed_.insert(settled->begin(), settled->end());
}

Result<std::set<int32_t>> KafkaSource::commit_anchors(const std::set<int32_t>& partitions) {
  std::map<int32_t, int64_t> anchors;
  std::map<int32_t, uint64_t> generations;
  {
    std::lock_guard lock(mu_);
    for (int32_t p : partitions) {
      auto owned = owned_.find(p);
      auto anchor = anchors_.anchor(p);
      if (owned == owned_.end() || !anchor) continue;
      anchors[p] = *anchor;
      generations[p] = owned->second.generation;
    }
  }
  std::set<int32_t> settled;
  if (anchors.empty()) return settled;  // nothing owned: speak for nothing

  auto& consumer = session_->consumer();
  std::vector<int32_t> ids;
  std::set<int32_t> owned;
  for (const auto& [p, anchor] : anchors) {
    ids.push_back(p);
    owned.insert(p);
  }
  auto committed =
      detail::committed_offsets(consumer, config_.topic(), ids, config_.sync_timeout());
  if (!committed) return fail(committed.error().error());
  auto to_commit = select_anchor_commits(anchors, owned, *committed);
  for (int32_t p : ids) {
    if (!to_commit.contains(p)) settled.insert(p);  // the group is already at or past it
  }
  if (to_commit.empty()) return settled;

  std::lock_guard commit_lock(commit_mu_);
  {
    // Re-check under commit_mu_: a revocation since the snapshot means the
    // partition is no longer ours to speak for.
    std::lock_guard lock(mu_);
    std::erase_if(to_commit, [&](const auto& entry) {
      auto it = owned_.find(entry.first);
      return it == owned_.end() || it->second.generation != generations[entry.first];
    });
  }
  if (to_commit.empty()) return settled;
  if (auto r = detail::commit_offsets(consumer, config_.topic(), to_commit, config_.sync_timeout());
      !r) {
    return fail(r.error().error());
  }
  log::info("{}: committed anchors {}", log_name_, to_commit);
  for (const auto& [p, offset] : to_commit) settled.insert(p);
  return settled;
}

Status KafkaSource::ack(const std::vector<connector::Message>& messages) {
  for (const auto& m : messages) {
    const auto* c = std::get_if<connector::KafkaCoordinates>(&m.coordinates);
    if (c == nullptr || c->topic != config_.topic()) {
      return fail(Error::bad_request(fmt::format("{}: ack of a message that is not from topic '{}'",
                                                 log_name_, config_.topic())));
    }
  }
  std::map<int32_t, int64_t> next_offsets;
  std::vector<std::string> dropped;
  std::lock_guard commit_lock(commit_mu_);
  {
    std::lock_guard lock(mu_);
    for (const auto& m : messages) {
      const auto& c = std::get<connector::KafkaCoordinates>(m.coordinates);
      auto owned = owned_.find(c.partition);
      if (owned == owned_.end() || owned->second.generation != m.generation) {
        dropped.push_back(fmt::format("{}@{}", c.partition, c.offset));
        continue;
      }
      auto [it, inserted] = next_offsets.try_emplace(c.partition, c.offset + 1);
      if (!inserted) it->second = std::max(it->second, c.offset + 1);
    }
    for (const auto& [p, next] : next_offsets) {
      owned_[p].acked_next = next;
      anchors_.raise(p, next);
    }
  }
  if (!dropped.empty()) {
    log::info(
        "{}: dropped acks for {} (partition revoked or reassigned since the "
        "message was read; its next owner redelivers it)",
        log_name_, dropped);
  }
  if (next_offsets.empty() || !session_) return {};
  detail::TopicPartitions offsets(config_.topic(), next_offsets);
  if (const auto code = session_->consumer().commitAsync(offsets.get());
      code != RdKafka::ERR_NO_ERROR) {
    return fail(detail::to_error(code, log_name_ + ": offset commit"));
  }
  return {};
}

Result<bool> KafkaSource::recover() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return fail(Error::internal(log_name_ + " is closed"));
  }
  if (session_ && session_->started()) {
    std::set<int32_t> owned;
    {
      std::lock_guard lock(mu_);
      for (const auto& [p, ownership] : owned_) owned.insert(p);
    }
    // KAF-3: without a commit, the rebuilt consumer would re-resolve the
    // reset policy against today's log end and skip the wedged record.
    // Mid-rebalance the assignment is empty and nothing is committed; the
    // rebuild then resumes from whatever the group holds.
    if (!owned.empty()) {
      auto settled = commit_anchors(owned);
      if (!settled) {
        return fail(Error{settled.error().kind,
                          fmt::format("{}: recover: anchor commit failed, consumer not "
                                      "rebuilt: {}",
                                      log_name_, settled.error().message),
                          settled.error().detail, settled.error().retry});
      }
      if (reset_ == OffsetReset::kLatest) {
        std::lock_guard lock(mu_);
        floors_committed_.insert(settled->begin(), settled->end());
      }
    }
    session_->shutdown();
    session_.reset();
  }
  {
    std::lock_guard lock(mu_);
    owned_.clear();
    buffer_.clear();
    paused_ = false;
    consumer_error_.reset();
  }
  if (auto started = ensure_session(); !started) return fail(started.error());
  log::info("{}: consumer rebuilt; resuming from the group's committed offsets", log_name_);
  return true;
}

Status KafkaSource::ensure_lag_handle() {
  if (lag_handle_) return {};
  auto properties = properties_;
  // Never a group member: it only reads offsets. A static member id would
  // make the broker confuse it with the real consumer.
  properties.erase("group.instance.id");
  auto client = properties.find("client.id");
  properties["client.id"] = (client == properties.end() ? "harvest" : client->second) + "-lag";
  auto conf = make_conf(properties, log_name_ + " (lag handle)");
  if (!conf) return fail(conf.error());
  if (auto s = set_callback<RdKafka::EventCb>(**conf, "event_cb", &lag_handle_events); !s) {
    return s;
  }
  std::string errstr;
  lag_handle_.reset(RdKafka::KafkaConsumer::create(conf->get(), errstr));
  if (!lag_handle_) {
    return fail(Error::config(fmt::format("{}: creating the lag handle: {}", log_name_, errstr)));
  }
  return {};
}

Result<std::optional<int64_t>> KafkaSource::lag(SteadyClock::time_point deadline) {
  const std::optional<int64_t> abandoned;
  std::unique_lock lag_lock(lag_mu_, deadline);
  if (!lag_lock.owns_lock()) return abandoned;
  {
    std::lock_guard lock(mu_);
    if (closed_) return fail(Error::internal(log_name_ + " is closed"));
  }
  if (auto s = ensure_lag_handle(); !s) return fail(s.error());
  auto& handle = *lag_handle_;
  // The handle is never polled otherwise; serve the error events queued on
  // it since the last sample so they do not accumulate.
  for (int i = 0; i < kMaxLagEventsDrained; ++i) {
    std::unique_ptr<RdKafka::Message> m(handle.consume(0));
    if (m->err() == RdKafka::ERR__TIMED_OUT) break;
  }

  // Each broker call gets what is left of the overall deadline (KAF-5), so a
  // degraded broker costs one sample its budget and no more.
  const auto left = [&] { return milliseconds(detail::remaining_ms(deadline)); };
  const auto give_up = [&](const detail::CallFailure& f) -> Result<std::optional<int64_t>> {
    if (f.timed_out() || SteadyClock::now() >= deadline) {
      log::debug("{}: lag sample abandoned at its deadline: {}", log_name_, f.message);
      return abandoned;
    }
    return fail(f.error());
  };

  if (left().count() == 0) return abandoned;
  auto partitions = detail::topic_partitions(handle, config_.topic(), left());
  if (!partitions) return give_up(partitions.error());
  if (left().count() == 0) return abandoned;
  auto committed = detail::committed_offsets(handle, config_.topic(), *partitions, left());
  if (!committed) return give_up(committed.error());
  if (left().count() == 0) return abandoned;
  auto high =
      detail::watermarks(handle, config_.topic(), *partitions, detail::Watermark::kHigh, left());
  if (!high) return give_up(high.error());

  std::map<int32_t, int64_t> anchors;
  {
    std::lock_guard lock(mu_);
    anchors = anchors_.all();
  }
  // Baseline per partition: the group's commit; else this process's anchor
  // (deliberately not filtered by ownership: a stale anchor skews one
  // sample, dropping it would re-open latest's false all-clear); else where
  // the reset policy would start: the log end for latest (records from
  // before this source are not its work), the log start otherwise.
  std::vector<int32_t> need_low;
  for (int32_t p : *partitions) {
    if (committed->contains(p) || anchors.contains(p)) continue;
    if (reset_ != OffsetReset::kLatest) need_low.push_back(p);
  }
  std::map<int32_t, int64_t> low;
  if (!need_low.empty()) {
    if (left().count() == 0) return abandoned;
    auto lows =
        detail::watermarks(handle, config_.topic(), need_low, detail::Watermark::kLow, left());
    if (!lows) return give_up(lows.error());
    low = std::move(*lows);
  }
  if (SteadyClock::now() > deadline) return abandoned;

  int64_t total = 0;
  for (int32_t p : *partitions) {
    const int64_t end = high->at(p);
    int64_t base = end;
    if (auto c = committed->find(p); c != committed->end()) {
      base = c->second;
    } else if (auto a = anchors.find(p); a != anchors.end()) {
      base = a->second;
    } else if (auto l = low.find(p); l != low.end()) {
      base = l->second;
    }
    total += std::max<int64_t>(0, end - base);
  }
  return total;
}

KafkaSource::Snapshot KafkaSource::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  for (const auto& [p, ownership] : owned_) s.owned.emplace(p, ownership.generation);
  s.anchors = anchors_.all();
  s.floors_committed = floors_committed_;
  s.buffered = buffer_.size();
  s.paused = paused_;
  return s;
}

}  // namespace harvest::kafka
