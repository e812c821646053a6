#include <fmt/format.h>

#include <harvest/store/pool.hpp>

namespace harvest::store {

PooledConnection::~PooledConnection() {
  if (pool_ && conn_) pool_->release(std::move(conn_));
}

Pool::Pool(PoolConfig config) : config_(std::move(config)) {
  if (config_.max_size == 0) config_.max_size = 1;
}

Pool::~Pool() = default;

size_t Pool::in_use() const {
  std::lock_guard lock(mu_);
  return open_ - idle_.size();
}

void Pool::discard_idle() {
  std::vector<std::unique_ptr<Connection>> dropped;
  {
    std::lock_guard lock(mu_);
    open_ -= idle_.size();
    dropped.swap(idle_);
  }
  cv_.notify_all();  // room to open fresh ones; closing happens outside the lock
}

Result<PooledConnection> Pool::acquire() {
  std::unique_lock lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + config_.acquire_timeout;
  while (true) {
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      if (conn->healthy()) return PooledConnection(this, std::move(conn));
      --open_;  // a broken idle connection is dropped and replaced below
      continue;
    }
    if (open_ < config_.max_size) {
      ++open_;
      lock.unlock();
      auto conn = Connection::open(config_.url, config_.transaction_pooler);
      if (!conn) {
        lock.lock();
        --open_;
        cv_.notify_one();
        return fail(conn.error());
      }
      return PooledConnection(this, std::move(*conn));
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= config_.max_size) {
      return fail(Error::transient_error(
          fmt::format("connection pool exhausted: all {} connections busy for {} ms",
                      config_.max_size, config_.acquire_timeout.count())));
    }
  }
}

void Pool::release(std::unique_ptr<Connection> conn) {
  if (conn->healthy() && conn->in_transaction()) {
    // Someone returned a connection mid-transaction; never hand that state on.
    (void)conn->exec("ROLLBACK");
  }
  std::lock_guard lock(mu_);
  if (conn->healthy() && !conn->in_transaction()) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;
  }
  cv_.notify_one();
}

}  // namespace harvest::store
