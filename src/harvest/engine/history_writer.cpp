#include <algorithm>

#include <harvest/engine/history_writer.hpp>

namespace harvest::engine {

HistoryWriter::HistoryWriter(store::Pool& pool, size_t max_batch)
    : pool_(pool), max_batch_(std::max<size_t>(1, max_batch)) {}

Status HistoryWriter::record(const Fence& fence, int op_seq, const RecordedOp& op) {
  auto r = submit(RunWrite{.fence = fence, .op_seq = op_seq, .op = op, .output = {}});
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::conflict("the run's lease is held by another worker"));
  return {};
}

Result<bool> HistoryWriter::complete(const Fence& fence, const Json& output) {
  return submit(RunWrite{.fence = fence, .op_seq = 0, .op = std::nullopt, .output = output});
}

size_t HistoryWriter::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

size_t HistoryWriter::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

size_t HistoryWriter::waiting() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

Result<bool> HistoryWriter::submit(RunWrite write) {
  Pending mine{std::move(write), std::nullopt};
  std::unique_lock lock(mu_);
  queue_.push_back(&mine);
  while (!mine.outcome) {
    if (committing_) {
      cv_.wait(lock);
      continue;
    }
    // No commit under way: this thread commits for everyone waiting.
    committing_ = true;
    std::vector<Pending*> batch;
    while (!queue_.empty() && batch.size() < max_batch_) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    std::vector<Result<bool>> outcomes;
    try {
      outcomes = commit(batch);
    } catch (...) {
      // commit() answers every item; should anything still escape, every
      // item below gets an error rather than a writer left waiting for ever.
    }
    lock.lock();
    // Outcomes are published under the lock: a waiter re-checks its own only
    // while holding it (woken by this commit or, spuriously, by an earlier
    // one), so it never sees one half-built.
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->outcome = i < outcomes.size()
                              ? std::move(outcomes[i])
                              : Result<bool>(fail(Error::internal("history write failed")));
    }
    writes_ += batch.size();
    ++commits_;
    committing_ = false;
    cv_.notify_all();
  }
  return std::move(*mine.outcome);
}

Result<bool> HistoryWriter::write_one(ExecutionStore& store, const RunWrite& w) {
  if (!w.op) {
    auto c = store.complete(w.fence, w.output, /*entity_reuse=*/false);
    if (!c) return fail(c.error());
    return c->completed;
  }
  auto s = store.record_op(w.fence, w.op_seq, *w.op);
  if (s) return true;
  if (s.error().kind == ErrorKind::kConflict) return false;
  return fail(s.error());
}

std::vector<Result<bool>> HistoryWriter::commit(const std::vector<Pending*>& batch) {
  // Reads each item's write (never changed once queued) and touches no
  // item's outcome: the caller publishes these under the lock.
  std::vector<Result<bool>> out;
  out.reserve(batch.size());
  const auto all = [&](const Result<bool>& r) {
    out.assign(batch.size(), r);
    return std::move(out);
  };
  try {
    auto conn = pool_.acquire();
    if (!conn) return all(fail(conn.error()));
    ExecutionStore store(**conn);
    if (batch.size() == 1) {
      out.push_back(write_one(store, batch.front()->write));
      return out;
    }
    std::vector<RunWrite> writes;
    writes.reserve(batch.size());
    for (auto* p : batch) writes.push_back(p->write);
    auto r = store.write_batch(writes);
    if (r && r->size() != batch.size()) {
      return all(fail(Error::internal("the store answered a history batch with the wrong count")));
    }
    if (r) {
      for (size_t i = 0; i < batch.size(); ++i) out.push_back((*r)[i]);
      return out;
    }
    if (!is_permanent(r.error())) return all(fail(r.error()));
    // Refused as a whole: find the write at fault by writing them one by one.
    for (auto* p : batch) out.push_back(write_one(store, p->write));
    return out;
  } catch (const std::exception& e) {
    // Items written before the throw keep their outcome; the rest get this.
    const Result<bool> err = fail(Error::internal(std::string("history write: ") + e.what()));
    while (out.size() < batch.size()) out.push_back(err);
    return out;
  }
}

}  // namespace harvest::engine
