// Wake-ups for workers, instead of a fixed poll.
//
// `WorkSignal` is an in-process epoch counter: every start, signal or
// admission firing that makes a run runnable bumps it, and idle run threads
// wait on it. `WorkListener` carries the same news between processes: starts
// issue `NOTIFY harvest_work` in their transaction, and one listener thread
// per shard (own connection, `LISTEN harvest_work`) bumps the local signal.
// Polling at WorkerConfig::poll_interval stays as the fallback for anything
// neither path sees (a timer falling due, a lapsed lease).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace harvest::engine {

// Thread-safe.
class WorkSignal {
 public:
  void notify();
  [[nodiscard]] uint64_t epoch() const;
  // Waits until the epoch moves past `seen`, `timeout` passes or `stop` is
  // requested; returns the epoch then.
  uint64_t wait(uint64_t seen, std::chrono::milliseconds timeout, std::stop_token stop);

 private:
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  uint64_t epoch_ = 0;
};

// One thread per shard URL, each holding a LISTEN connection; reconnects with
// back-off (up to 5 s) when the database goes away. Owned by the worker pool:
// `start()`/`stop()` from its owner's thread; the destructor stops.
class WorkListener {
 public:
  WorkListener(std::vector<std::string> urls, WorkSignal& signal);
  ~WorkListener();
  WorkListener(const WorkListener&) = delete;
  WorkListener& operator=(const WorkListener&) = delete;

  void start();
  void stop();

 private:
  void listen_loop(const std::string& url, std::stop_token stop);

  std::vector<std::string> urls_;
  WorkSignal& signal_;
  std::vector<std::jthread> threads_;
};

}  // namespace harvest::engine
