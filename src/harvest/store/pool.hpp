// A bounded PostgreSQL connection pool.
//
// `acquire()` waits at most `acquire_timeout` for a free connection and
// answers a transient error when none frees up (pool exhausted) or the server
// cannot be reached, so callers never hang on a saturated database.
// Thread-safe. Connections are opened lazily up to `max_size`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <harvest/store/pg.hpp>

namespace harvest::store {

struct PoolConfig {
  std::string url;
  // Upper bound on open connections. Default 16.
  size_t max_size = 16;
  // Longest wait for a free connection before a transient "pool exhausted"
  // error. Default 5 s.
  std::chrono::milliseconds acquire_timeout{5000};
  // The URL reaches PostgreSQL through a pooler in transaction mode
  // (Connection::open). Default false.
  bool transaction_pooler = false;
};

class Pool;

// A connection on loan from the pool; returned on destruction. A connection
// left inside a transaction or broken is discarded rather than reused.
class PooledConnection {
 public:
  PooledConnection(Pool* pool, std::unique_ptr<Connection> conn)
      : pool_(pool), conn_(std::move(conn)) {}
  PooledConnection(PooledConnection&&) noexcept = default;
  PooledConnection& operator=(PooledConnection&&) noexcept = default;
  ~PooledConnection();

  Connection& operator*() { return *conn_; }
  Connection* operator->() { return conn_.get(); }

 private:
  Pool* pool_;
  std::unique_ptr<Connection> conn_;
};

class Pool {
 public:
  explicit Pool(PoolConfig config);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  [[nodiscard]] Result<PooledConnection> acquire();
  [[nodiscard]] const PoolConfig& config() const { return config_; }
  // Connections currently lent out.
  [[nodiscard]] size_t in_use() const;
  // Closes every idle connection (lent ones are discarded when returned
  // broken). After the server was unreachable the idle ones are dead too, and
  // each would fail one caller before being replaced.
  void discard_idle();

 private:
  friend class PooledConnection;
  void release(std::unique_ptr<Connection> conn);

  PoolConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t open_ = 0;  // idle + lent out + being opened
};

}  // namespace harvest::store
