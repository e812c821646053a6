// libpq, wrapped: connections, results and transactions as RAII values, with
// libpq/SQLSTATE failures translated into harvest `Error`s.
//
// All statements use text-format parameters ($1, $2, ...); `std::nullopt`
// binds SQL NULL.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/error.hpp>

namespace harvest::store {

using Param = std::optional<std::string>;
using Params = std::vector<Param>;

// How a statement is parsed and planned.
enum class Plan {
  // Parsed and planned on each execution.
  kAdHoc,
  // Prepared once per connection and reused (parsed once, planned on each
  // execution: harvest's sessions run with plan_cache_mode =
  // force_custom_plan): for the hot, fixed statements of the durable path.
  kPrepared,
  // Prepared, and planned once per session and reused (a generic plan, made
  // with sequential scans disabled), for a statement that reaches rows only
  // through unique keys: no table size makes a scan right for it, and planning
  // it on every execution cost as much as running it. Other statements of the
  // pipeline are planned as usual.
  kKeyed,
};

// One statement of a pipeline.
struct Statement {
  Statement(std::string_view text, Params p = {}, Plan how = Plan::kAdHoc)
      : sql(text), params(std::move(p)), plan(how) {}
  std::string sql;
  Params params;
  Plan plan;
  [[nodiscard]] bool prepared() const { return plan != Plan::kAdHoc; }
  [[nodiscard]] bool keyed() const { return plan == Plan::kKeyed; }
};

// A query result. Rows/columns are addressed by index or column name.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* r) : res_(r, &PQclear) {}

  [[nodiscard]] int rows() const { return res_ ? PQntuples(res_.get()) : 0; }
  [[nodiscard]] bool empty() const { return rows() == 0; }
  [[nodiscard]] bool is_null(int row, int col) const { return PQgetisnull(res_.get(), row, col); }
  [[nodiscard]] bool is_null(int row, const char* col) const { return is_null(row, column(col)); }
  [[nodiscard]] std::string get(int row, int col) const;
  [[nodiscard]] std::string get(int row, const char* col) const { return get(row, column(col)); }
  [[nodiscard]] std::optional<std::string> get_opt(int row, const char* col) const;
  [[nodiscard]] long long get_int(int row, const char* col) const;
  [[nodiscard]] bool get_bool(int row, const char* col) const { return get(row, col) == "t"; }
  [[nodiscard]] int column(const char* name) const;
  // Rows affected by an INSERT/UPDATE/DELETE.
  [[nodiscard]] long long affected() const;

 private:
  std::shared_ptr<PGresult> res_;
};

// One database connection. Not thread-safe: one thread uses it at a time.
class Connection {
 public:
  // Connects synchronously; a refused/unreachable server is a transient error.
  // `transaction_pooler`: the URL reaches PostgreSQL through a pooler in
  // transaction mode (PgBouncer pool_mode=transaction), which may hand each
  // transaction to another server session — so nothing is kept on the
  // session: no named prepared statements, no session settings.
  [[nodiscard]] static Result<std::unique_ptr<Connection>> open(const std::string& url,
                                                                bool transaction_pooler = false);
  // Wraps a connection the caller owns (e.g. for a transactional start inside
  // the caller's own transaction). The PGconn is not closed by this object.
  [[nodiscard]] static std::unique_ptr<Connection> borrow(PGconn* conn);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  [[nodiscard]] Result<PgResult> exec(std::string_view sql, const Params& params = {});
  // Sends `statements` in one round trip (libpq pipeline mode) and returns
  // their results in order. Outside a transaction block they run as one
  // implicit transaction, committed together at the end (or not at all):
  // the first failure aborts the rest and is the error returned. Inside the
  // caller's transaction they simply run in it.
  [[nodiscard]] Result<std::vector<PgResult>> exec_pipeline(
      const std::vector<Statement>& statements);
  // exec() of a statement prepared once per session (see Statement).
  [[nodiscard]] Result<PgResult> exec_prepared(std::string_view sql, const Params& params = {});
  // exec_prepared() of a Plan::kKeyed statement (see Statement).
  [[nodiscard]] Result<PgResult> exec_keyed(std::string_view sql, const Params& params = {});
  // Waits up to `timeout` for a notification on a channel this connection
  // LISTENs to. true: at least one arrived (all pending ones are consumed).
  // Errors: transient when the connection broke.
  [[nodiscard]] Result<bool> wait_notification(std::chrono::milliseconds timeout);
  // Runs several statements without parameters (migrations).
  [[nodiscard]] Status exec_script(const std::string& sql);
  [[nodiscard]] bool healthy() const;
  [[nodiscard]] PGconn* raw() const { return conn_; }
  // True while inside BEGIN ... COMMIT/ROLLBACK.
  [[nodiscard]] bool in_transaction() const;

 private:
  Connection(PGconn* c, bool owned, bool pooled = false)
      : conn_(c), owned_(owned), pooled_(pooled) {}
  PGconn* conn_;
  bool owned_;
  bool pooled_;  // behind a transaction pooler: no session state
  // Names of the statements prepared on this session, by SQL text.
  std::map<std::string, std::string> prepared_;
  uint64_t next_prepared_ = 0;
};

// Commits in doubt in this process so far: a COMMIT, or the sync point of a
// pipeline outside a transaction, was sent and the connection broke before
// its answer (each is also logged as a warning).
[[nodiscard]] uint64_t commits_in_doubt();

// BEGIN on construction, ROLLBACK on destruction unless committed.
class Transaction {
 public:
  [[nodiscard]] static Result<Transaction> begin(Connection& conn);
  Transaction(Transaction&& o) noexcept : conn_(o.conn_), done_(o.done_) { o.done_ = true; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  [[nodiscard]] Status commit();
  [[nodiscard]] Connection& conn() { return *conn_; }

 private:
  explicit Transaction(Connection& c) : conn_(&c) {}
  Connection* conn_;
  bool done_ = false;
};

// Quotes an identifier for SQL text (database names in tests and the CLI).
[[nodiscard]] std::string quote_ident(const std::string& ident);

}  // namespace harvest::store
