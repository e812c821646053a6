#include <fmt/format.h>
#include <fmt/ranges.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include <harvest/common/deadline_mutex.hpp>
#include <harvest/common/log.hpp>
#include <harvest/common/strings.hpp>
#include <harvest/kafka/anchor_book.hpp>
#include <harvest/kafka/broker_calls.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka {

using detail::footprint;
using detail::log_librdkafka;
using detail::make_conf;
using detail::partition_ids;
using detail::set_callback;
using detail::to_message;
namespace {

std::atomic<uint64_t> instances{0};

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// How long one consume() call blocks. It bounds the poller's reaction time
// to a stop request and to buffer space freeing up (resume), and keeps
// librdkafka polled far more often than any max.poll.interval.ms.
constexpr int kPollSliceMs = 100;
// How long connect() waits for the cluster id once the brokers answered.
constexpr int kClusterIdWait = 5000;

// How long connect() waits for the brokers to answer (or refuse) at start.
constexpr auto kAccessCheck = std::chrono::seconds(10);
// How long a full read-ahead holds consumption before partitions are paused.
constexpr auto kHoldBeforePause = std::chrono::seconds(1);

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
    // close_timeout bounds the whole shutdown: leaving the group and closing.
    const auto deadline = SteadyClock::now() + source_.config_.close_timeout();
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
    // Leaving the group gets at least a short slice even when the drain used
    // up the deadline: against a live broker it takes milliseconds.
    (void)detail::close_consumer(
        *consumer_, std::max(deadline, SteadyClock::now() + std::chrono::milliseconds(500)),
        source_.log_name_);
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

  // Asks the brokers for metadata until they answer (success), refuse the
  // connection's TLS or SASL (a config error naming the brokers and what
  // librdkafka said), or are all down, or `budget` passes (both success:
  // an outage, ridden out later). Serves the consumer's events meanwhile.
  [[nodiscard]] Status check_access(std::chrono::milliseconds budget) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    bool down_seen = false;
    for (;;) {
      RdKafka::Metadata* md = nullptr;
      if (consumer_->metadata(false, nullptr, &md, 200) == RdKafka::ERR_NO_ERROR) {
        delete md;
        return {};
      }
      std::unique_ptr<RdKafka::Message> m(consumer_->consume(50));
      note_access(m->err(), m->errstr());  // an error can come as a message too
      {
        std::lock_guard lock(access_mu_);
        if (access_error_) {
          return fail(Error::config(fmt::format(
              "{}: the brokers refused the connection ({}); check security.protocol, the CA "
              "(ssl.ca.location) and the SASL mechanism and credentials",
              source_.log_name_, *access_error_)));
        }
        if (all_down_ && down_seen) break;  // one more round for a late TLS error
        down_seen = all_down_;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
    }
    log::warn("{}: no broker answered at start; consuming once one does", source_.log_name_);
    return {};
  }

  void event_cb(RdKafka::Event& event) override {
    if (event.type() == RdKafka::Event::EVENT_ERROR && !event.fatal()) {
      note_access(event.err(), event.str());
    }
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

  // Keeps what check_access() looks for: the first TLS or SASL refusal, and
  // whether every broker was found down.
  void note_access(RdKafka::ErrorCode err, const std::string& text) {
    std::lock_guard lock(access_mu_);
    if (err == RdKafka::ERR__AUTHENTICATION || err == RdKafka::ERR__SSL) {
      if (!access_error_) access_error_ = text;
    } else if (err == RdKafka::ERR__ALL_BROKERS_DOWN) {
      all_down_ = true;
    }
  }

  std::mutex access_mu_;
  std::optional<std::string> access_error_;  // guarded by access_mu_
  bool all_down_ = false;                    // guarded by access_mu_

  void poll_loop(const std::stop_token& stop) {
    const std::string& topic = source_.config_.topic();
    while (!stop.stop_requested()) {
      if (hold_for_space()) continue;
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

  // While the read-ahead is full, and for less than kHoldBeforePause, the
  // poller does not consume: what librdkafka prefetched stays in its queue
  // and is delivered as soon as receive() makes room. Returns whether it
  // held (waited a slice for space).
  bool hold_for_space() {
    std::unique_lock lock(source_.mu_);
    if (source_.paused_ || !source_.read_ahead_full()) {
      full_since_.reset();
      return false;
    }
    const auto now = SteadyClock::now();
    if (!full_since_) full_since_ = now;
    if (now - *full_since_ >= kHoldBeforePause) {
      // Still full: pause before consuming again (a paused partition
      // delivers nothing more), then serve the group while paused.
      lock.unlock();
      apply_backpressure();
      return false;
    }
    source_.space_.wait_for(lock, milliseconds(kPollSliceMs));
    return true;
  }

  // Pauses every assigned partition when the read-ahead has been full for
  // kHoldBeforePause and resumes them at half. librdkafka keeps serving the
  // group while paused (heartbeats, rebalances, max.poll.interval.ms).
  // pause() bumps the partition's version barrier at once, so messages
  // already prefetched are discarded rather than delivered, and fetching
  // restarts from the last message handed to us on resume: nothing is lost
  // or repeated.
  void apply_backpressure() {
    bool pause = false;
    bool resume = false;
    {
      std::lock_guard lock(source_.mu_);
      const bool held_long = full_since_ && SteadyClock::now() - *full_since_ >= kHoldBeforePause;
      if (!source_.paused_ && source_.read_ahead_full() && held_long) {
        source_.paused_ = pause = true;
      } else if (source_.paused_ && source_.read_ahead_half()) {
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
  std::optional<SteadyClock::time_point> full_since_;  // poller thread only
  bool started_ = false;
  bool closed_ = false;
  // Declared last: stopped and joined (in shutdown) before the rest goes.
  std::jthread poller_;
};

RdKafka::KafkaConsumer& KafkaSource::session_consumer() {
  return session_->consumer();
}

Result<std::shared_ptr<KafkaSource>> KafkaSource::connect(const KafkaSourceConfig& given) {
  // HARVEST_KAFKA_PROPERTIES_FILE: the deployment's client properties (TLS,
  // SASL), applied after the code's own, so a binary is pointed at a managed
  // cluster by configuration alone.
  KafkaSourceConfig config = given;
  if (const char* path = std::getenv("HARVEST_KAFKA_PROPERTIES_FILE"); path && *path) {
    auto file = detail::load_properties_file(path);
    if (!file) return fail(file.error());
    for (auto& [key, value] : *file) config.property(std::move(key), std::move(value));
  }
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
        ascii_lower(value) != "false") {
      log::warn(
          "{}: ignoring {}={}: harvest commits an offset only after the "
          "runtime acks the message, so it is forced to false",
          source->log_name_, key, value);
    }
  }
  auto session = Session::create(*source);
  if (!session) return fail(session.error());
  source->session_ = std::move(*session);
  // A wrong CA, an expired certificate or a wrong password never heals by
  // retrying: refuse to start rather than log the failure forever. Brokers
  // that are merely down are an outage the source rides out.
  if (auto access = source->session_->check_access(kAccessCheck); !access) {
    return fail(access.error());
  }
  // The cluster's identity, recorded per binding (connector/cluster_identity.hpp).
  source->cluster_id_ = source->session_consumer().clusterid(kClusterIdWait);
  if (source->cluster_id_.empty()) {
    log::warn(
        "{}: the brokers did not report a cluster id at start: this binding's cluster is "
        "not checked against the one it consumed from before",
        source->log_name_);
  }
  return source;
}

KafkaSource::KafkaSource(Passkey, KafkaSourceConfig config)
    : config_(std::move(config)),
      properties_(config_.effective_properties()),
      identity_(kafka::subscription_identity(config_)),
      log_name_(fmt::format("KafkaSource#{} {}", ++instances, identity_)),
      reset_(config_.offset_reset()),
      anchors_(std::make_unique<AnchorBook>()),
      lag_mu_(std::make_unique<DeadlineMutex>()) {}

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
  std::lock_guard lag_lock(*lag_mu_);
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
      buffer_bytes_ -= std::min(buffer_bytes_, footprint(buffer_.front()));
      batch.push_back(std::move(buffer_.front()));
      buffer_.pop_front();
    }
    if (!batch.empty()) space_.notify_all();
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
    buffer_bytes_ = 0;
    paused_ = false;
    consumer_error_.reset();
  }
  if (session_) {
    session_->shutdown();
    session_.reset();
  }
  // The next receive creates and starts a fresh consumer (ensure_session).
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
    buffer_bytes_ = 0;
    paused_ = false;
    consumer_error_.reset();
  }
  if (auto started = ensure_session(); !started) return fail(started.error());
  log::info("{}: consumer rebuilt; resuming from the group's committed offsets", log_name_);
  return true;
}

}  // namespace harvest::kafka
