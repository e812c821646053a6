// Group commit of run history for one shard. A worker's run threads hand
// their step records and plain completions to the writer of their run's
// shard; whichever thread finds no commit under way commits everything
// waiting (up to `max_batch`) in one transaction of one round trip
// (ExecutionStore::write_batch), and every thread returns once its own write
// is durable, with its own outcome. A lone write goes through the
// single-write statements, so an idle worker pays no more than before.
//
// A batch the database refuses as a whole (a permanent error) is retried one
// write at a time, so one bad write never fails the others; a transient
// error is every waiting write's, and nothing was written.
//
// Thread-safe: any number of run threads call it at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include <harvest/engine/execution_store.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine {

class HistoryWriter {
 public:
  static constexpr size_t kDefaultMaxBatch = 128;

  explicit HistoryWriter(store::Pool& pool, size_t max_batch = kDefaultMaxBatch);
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;

  // Records the result of operation `op_seq`. kConflict: the lease is lost.
  [[nodiscard]] Status record(const Fence& fence, int op_seq, const RecordedOp& op);
  // Completes a plain (non-entity) run; false when the fence no longer held.
  [[nodiscard]] Result<bool> complete(const Fence& fence, const Json& output);

  // Writes committed so far, and the commits they took (for tests and
  // benchmarks: commits < writes once batching happens).
  [[nodiscard]] size_t writes() const;
  [[nodiscard]] size_t commits() const;
  // Writes queued behind the commit under way.
  [[nodiscard]] size_t waiting() const;

 private:
  struct Pending {
    RunWrite write;
    std::optional<Result<bool>> outcome;
  };

  Result<bool> submit(RunWrite write);
  // Writes `batch` and returns each item's outcome, in order; never throws.
  // Runs outside the lock, so it must not touch any item's `outcome`.
  std::vector<Result<bool>> commit(const std::vector<Pending*>& batch);
  Result<bool> write_one(ExecutionStore& store, const RunWrite& w);

  store::Pool& pool_;
  const size_t max_batch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_;  // waiting, not yet taken by a commit
  bool committing_ = false;
  size_t writes_ = 0;
  size_t commits_ = 0;
};

}  // namespace harvest::engine
