// KafkaSource: group-wide lag from a separate, lazily created handle,
// within the caller's deadline.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>

#include <harvest/common/deadline_mutex.hpp>
#include <harvest/common/log.hpp>
#include <harvest/kafka/anchor_book.hpp>
#include <harvest/kafka/broker_calls.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka {

using detail::make_conf;
using detail::set_callback;

namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Cap on error events drained from the lag handle per sample.
constexpr int kMaxLagEventsDrained = 1000;

// Routes the lag handle's librdkafka logs and errors to the harvest log.
// Stateless and static, because librdkafka may log from its own threads
// until the handle is fully destroyed.
class LagHandleEvents final : public RdKafka::EventCb {
 public:
  void event_cb(RdKafka::Event& event) override { detail::log_librdkafka(event, "lag handle"); }
};
LagHandleEvents lag_handle_events;

}  // namespace

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
  std::unique_lock lag_lock(*lag_mu_, deadline);
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
    anchors = anchors_->all();
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

}  // namespace harvest::kafka
