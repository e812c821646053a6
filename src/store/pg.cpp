#include "store/pg.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "common/log.hpp"
#include "store/pg_error.hpp"

namespace harvest::store {

std::string PgResult::get(int row, int col) const {
  return std::string(PQgetvalue(res_.get(), row, col), PQgetlength(res_.get(), row, col));
}

std::optional<std::string> PgResult::get_opt(int row, const char* col) const {
  int c = column(col);
  if (is_null(row, c)) return std::nullopt;
  return get(row, c);
}

long long PgResult::get_int(int row, const char* col) const {
  return std::strtoll(PQgetvalue(res_.get(), row, column(col)), nullptr, 10);
}

int PgResult::column(const char* name) const {
  int c = PQfnumber(res_.get(), name);
  if (c < 0) throw std::logic_error(fmt::format("result has no column '{}'", name));
  return c;
}

long long PgResult::affected() const {
  const char* n = PQcmdTuples(res_.get());
  return (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c);
    PQfinish(c);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return fail(Error{ErrorKind::kTransient, "cannot connect to the database; retry",
                      "cannot connect to PostgreSQL: " + msg});
  }
  // Keep server notices (e.g. "relation already exists, skipping") off stderr.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<Connection>(new Connection(c, true));
}

std::unique_ptr<Connection> Connection::borrow(PGconn* conn) {
  return std::unique_ptr<Connection>(new Connection(conn, false));
}

Connection::~Connection() {
  if (owned_ && conn_) PQfinish(conn_);
}

bool Connection::healthy() const {
  return conn_ && PQstatus(conn_) == CONNECTION_OK;
}

bool Connection::in_transaction() const {
  auto s = PQtransactionStatus(conn_);
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

Result<PgResult> Connection::exec(const std::string& sql, const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  PgResult result(r);
  auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  return fail(classify_pg_error(r, conn_, "query failed"));
}

Status Connection::exec_script(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  PgResult result(r);
  auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return {};
  return fail(classify_pg_error(r, conn_, "script failed"));
}

Result<Transaction> Transaction::begin(Connection& conn) {
  auto r = conn.exec("BEGIN");
  if (!r) return fail(r.error());
  return Transaction(conn);
}

Transaction::~Transaction() {
  if (!done_ && conn_->healthy()) {
    // Rolling back an abandoned transaction; a failure here leaves the
    // connection unhealthy and the pool discards it.
    (void)conn_->exec("ROLLBACK");
  }
}

Status Transaction::commit() {
  done_ = true;
  auto r = conn_->exec("COMMIT");
  if (!r) return fail(r.error());
  return {};
}

std::string quote_ident(const std::string& ident) {
  std::string out = "\"";
  for (char c : ident) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace harvest::store
