#include <algorithm>

#include <harvest/connector/dispatch_pool.hpp>

namespace harvest::connector {

DispatchPool::DispatchPool(size_t threads) {
  threads = std::max<size_t>(threads, 1);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this](std::stop_token st) { loop(st); });
  }
}

DispatchPool::~DispatchPool() {
  for (auto& t : threads_) t.request_stop();
  work_cv_.notify_all();
  threads_.clear();
}

void DispatchPool::run(size_t count, const std::function<void(size_t)>& task) {
  if (count == 0) return;
  std::unique_lock lock(mu_);
  task_ = &task;
  next_ = 0;
  count_ = count;
  pending_ = count;
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
}

void DispatchPool::loop(std::stop_token st) {
  std::unique_lock lock(mu_);
  while (true) {
    if (!work_cv_.wait(lock, st, [&] { return task_ != nullptr && next_ < count_; })) return;
    const size_t i = next_++;
    const auto* task = task_;
    lock.unlock();
    (*task)(i);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace harvest::connector
