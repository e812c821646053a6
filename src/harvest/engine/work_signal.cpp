#include <algorithm>

#include <harvest/common/log.hpp>
#include <harvest/engine/sql/work.hpp>
#include <harvest/engine/work_signal.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::engine {

void WorkSignal::notify() {
  {
    std::lock_guard lock(mu_);
    ++epoch_;
  }
  cv_.notify_all();
}

uint64_t WorkSignal::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

uint64_t WorkSignal::wait(uint64_t seen, std::chrono::milliseconds timeout, std::stop_token stop) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, stop, timeout, [&] { return epoch_ != seen; });
  return epoch_;
}

WorkListener::WorkListener(std::vector<std::string> urls, WorkSignal& signal)
    : urls_(std::move(urls)), signal_(signal) {}

WorkListener::~WorkListener() {
  stop();
}

void WorkListener::start() {
  if (!threads_.empty()) return;
  for (const auto& url : urls_) {
    threads_.emplace_back([this, url](std::stop_token st) { listen_loop(url, st); });
  }
}

void WorkListener::stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();
}

void WorkListener::listen_loop(const std::string& url, std::stop_token stop) {
  std::chrono::milliseconds backoff{250};
  std::mutex mu;
  std::condition_variable_any cv;
  auto nap = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, d, [] { return false; });
  };
  while (!stop.stop_requested()) {
    auto conn = store::Connection::open(url);
    if (conn) {
      if (auto l = (*conn)->exec(sql::work::listen); !l) conn = fail(l.error());
    }
    if (!conn) {
      log::debug("work listener cannot listen ({}); retrying in {} ms", conn.error().describe(),
                 backoff.count());
      nap(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      continue;
    }
    backoff = std::chrono::milliseconds(250);
    // Anything may have been missed while not listening.
    signal_.notify();
    while (!stop.stop_requested()) {
      auto got = (*conn)->wait_notification(std::chrono::milliseconds(250));
      if (!got) break;  // reconnect
      if (*got) signal_.notify();
    }
  }
}

}  // namespace harvest::engine
