#include <harvest/api/overview_cache.hpp>
#include <harvest/common/log.hpp>

namespace harvest::api {

OverviewCache::OverviewCache(Count count, std::chrono::milliseconds ttl)
    : count_(std::move(count)), ttl_(ttl), refresher_([this] { refresh_loop(); }) {}

OverviewCache::~OverviewCache() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  refresher_.join();
}

Result<std::string> OverviewCache::get(long long window) {
  {
    std::lock_guard lock(mu_);
    if (auto it = answers_.find(window); it != answers_.end()) {
      Answer& a = it->second;
      if (std::chrono::steady_clock::now() - a.at >= ttl_ && !a.refreshing) {
        a.refreshing = true;
        due_.push_back(window);
        wake_.notify_one();
      }
      return a.body;
    }
  }
  // The first request for this window: count now, unless a concurrent one
  // just did.
  std::lock_guard count_lock(counting_);
  {
    std::lock_guard lock(mu_);
    if (auto it = answers_.find(window); it != answers_.end()) return it->second.body;
  }
  auto body = count_(window);
  if (!body) return fail(body.error());
  keep(window, *body);
  return body;
}

void OverviewCache::keep(long long window, std::string body) {
  std::lock_guard lock(mu_);
  if (!answers_.contains(window) && answers_.size() >= kMaxWindows) {
    auto oldest = answers_.begin();
    for (auto it = answers_.begin(); it != answers_.end(); ++it) {
      if (!it->second.refreshing && it->second.at < oldest->second.at) oldest = it;
    }
    answers_.erase(oldest);
  }
  answers_[window] = Answer{.at = std::chrono::steady_clock::now(), .body = std::move(body)};
}

void OverviewCache::refresh_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !due_.empty(); });
    if (stopping_) return;
    const long long window = due_.front();
    due_.pop_front();
    lock.unlock();
    Result<std::string> body = [&] {
      std::lock_guard count_lock(counting_);
      return count_(window);
    }();
    if (body) {
      keep(window, std::move(*body));
    } else {
      log::warn("the overview's counts could not be refreshed: {}", body.error().message);
      std::lock_guard drop(mu_);
      answers_.erase(window);  // the next request counts, and answers the error
    }
    lock.lock();
  }
}

}  // namespace harvest::api
