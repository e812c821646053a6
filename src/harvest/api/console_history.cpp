#include <fmt/chrono.h>
#include <fmt/format.h>

#include <harvest/api/console_history.hpp>
#include <harvest/api/views.hpp>

namespace harvest::api {

namespace {

std::string iso(std::chrono::system_clock::time_point at) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                     std::chrono::time_point_cast<std::chrono::seconds>(at));
}

long long epoch_seconds(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
}

}  // namespace

ConsoleHistory::ConsoleHistory(engine::Engine& engine,
                               std::function<std::vector<BindingOverview>()> bindings,
                               std::chrono::milliseconds sample_every)
    : engine_(engine),
      bindings_(std::move(bindings)),
      sample_every_(sample_every),
      cache_([this](long long) { return count(); }, std::chrono::seconds(5)) {
  if (bindings_) sampler_ = std::thread([this] { sample_loop(); });
}

ConsoleHistory::~ConsoleHistory() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

Result<std::string> ConsoleHistory::body() {
  return cache_.get(0);
}

void ConsoleHistory::sample_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const auto bindings = bindings_();
    const auto now = std::chrono::system_clock::now();
    lock.lock();
    for (const auto& b : bindings) {
      if (!lag_.contains(b.binding) && lag_.size() >= kMaxBindings) continue;
      auto& points = lag_[b.binding];
      points.push_back(LagPoint{.at = now, .lag = b.lag});
      while (!points.empty() && now - points.front().at > std::chrono::minutes(kMinutes)) {
        points.pop_front();
      }
    }
    wake_.wait_for(lock, sample_every_, [&] { return stopping_; });
  }
}

Result<std::string> ConsoleHistory::count() {
  const auto now = std::chrono::system_clock::now();
  const long long this_minute = epoch_seconds(now) / 60 * 60;
  const long long first = this_minute - (kMinutes - 1) * 60;
  // Minutes before the previous one are settled (a run's times are its
  // transaction's, committed within seconds): count from the previous one.
  const long long since = minutes_.empty() ? first : std::max(first, this_minute - 60);
  auto counted = engine_.activity(since);
  if (!counted) return fail(counted.error());
  for (const auto& m : *counted) minutes_[m.minute] = m;
  std::erase_if(minutes_, [&](const auto& kv) { return kv.first < first; });
  Json minutes = Json::array();
  for (long long at = first; at <= this_minute; at += 60) {
    auto it = minutes_.find(at);
    const engine::MinuteActivity m = it == minutes_.end() ? engine::MinuteActivity{} : it->second;
    minutes.push_back(
        Json{{"at", iso(std::chrono::system_clock::time_point(std::chrono::seconds(at)))},
             {"started", m.started},
             {"completed", m.completed},
             {"failed", m.failed}});
  }
  Json lag = Json::array();
  {
    std::lock_guard lock(mu_);
    for (const auto& [binding, points] : lag_) {
      Json series = Json::array();
      for (const auto& p : points) {
        series.push_back(Json{{"at", iso(p.at)}, {"lag", p.lag ? Json(*p.lag) : Json(nullptr)}});
      }
      lag.push_back(Json{{"binding", binding}, {"points", std::move(series)}});
    }
  }
  return dump(Json{{"as_of", iso(now)}, {"minutes", std::move(minutes)}, {"lag", std::move(lag)}});
}

}  // namespace harvest::api
