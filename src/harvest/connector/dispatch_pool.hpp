// A fixed pool of dispatch threads for one binding. `run` hands it N
// indexed tasks and returns when all are done; at most `threads` run at
// once, and with one thread they run strictly in index order (the broker
// order that `max_in_flight(1)` promises).
//
// Threads: `run` is called from one thread at a time (the consumer thread);
// tasks run on the pool's threads. A task that throws is the task's problem:
// `run` catches nothing, so tasks must not throw.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

namespace harvest::connector {

class DispatchPool {
 public:
  explicit DispatchPool(size_t threads);
  ~DispatchPool();
  DispatchPool(const DispatchPool&) = delete;
  DispatchPool& operator=(const DispatchPool&) = delete;

  // Runs task(i) for every i in [0, count) and waits for all of them.
  void run(size_t count, const std::function<void(size_t)>& task);

  [[nodiscard]] size_t threads() const { return threads_.size(); }

 private:
  void loop(std::stop_token st);

  std::mutex mu_;
  std::condition_variable_any work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t)>* task_ = nullptr;
  size_t next_ = 0;     // next index to hand out
  size_t count_ = 0;    // indices in the current run
  size_t pending_ = 0;  // handed out or not yet, still unfinished
  std::vector<std::jthread> threads_;
};

}  // namespace harvest::connector
