#include <fmt/format.h>
#include <poll.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include <harvest/common/log.hpp>
#include <harvest/store/pg.hpp>
#include <harvest/store/pg_error.hpp>
#include <harvest/store/pipeline.hpp>
#include <harvest/store/sql/session.hpp>

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

namespace {

// Connection settings harvest applies unless the URL sets them (the URL's own
// values win: they are expanded after these). libpq's defaults wait forever
// on a peer that went silent: no connect timeout, no keepalive, and a write
// the network swallows is retransmitted for about 15 minutes. With these:
//  - a connect attempt gives up after 5 s (per host of a multi-host URL, so
//    a failover's dead primary does not hold up the standby);
//  - an idle session (a LISTEN, a pooled connection) whose peer vanished is
//    dropped after about 25 s of unanswered keepalives;
//  - a statement whose bytes the network stopped acknowledging fails after
//    15 s (tcp_user_timeout), as a connection failure: the store is then
//    unavailable, intake pauses and the work is retried on a new session.
// A long statement on a healthy network is not affected: the server
// acknowledges what it received while it works.
constexpr const char* kDefaultKeywords[] = {"connect_timeout",  "keepalives",
                                            "keepalives_idle",  "keepalives_interval",
                                            "keepalives_count", "tcp_user_timeout"};
constexpr const char* kDefaultValues[] = {"5", "1", "10", "5", "3", "15000"};

PGconn* connect_with_defaults(const std::string& url) {
  constexpr size_t n = std::size(kDefaultKeywords);
  const char* keywords[n + 2];
  const char* values[n + 2];
  for (size_t i = 0; i < n; ++i) {
    keywords[i] = kDefaultKeywords[i];
    values[i] = kDefaultValues[i];
  }
  keywords[n] = "dbname";  // expanded: a URL or key=value string, parsed by libpq
  values[n] = url.c_str();
  keywords[n + 1] = nullptr;
  values[n + 1] = nullptr;
  return PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
}

// A commit whose answer never came: the connection broke after the commit
// (COMMIT, or a pipeline's sync point) was sent. The database may or may
// not have committed; every durable write of harvest is idempotent, so the
// caller's retry settles it either way. Counted and logged so that a fault
// test can show its cuts landed there (scripts/chaos/network.sh).
std::atomic<uint64_t> g_commits_in_doubt{0};

void note_commit_in_doubt(std::string_view what) {
  const uint64_t n = g_commits_in_doubt.fetch_add(1, std::memory_order_relaxed) + 1;
  log::warn(
      "commit in doubt: the connection to PostgreSQL broke after {} was sent and before its "
      "answer, so whether it committed is unknown; the write is retried, and a repeat changes "
      "nothing ({} so far)",
      what, n);
}

}  // namespace

uint64_t commits_in_doubt() {
  return g_commits_in_doubt.load(std::memory_order_relaxed);
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& url,
                                                     bool transaction_pooler) {
  PGconn* c = connect_with_defaults(url);
  if (PQstatus(c) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c);
    PQfinish(c);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return fail(Error::unavailable("cannot connect to the database; retry",
                                   "cannot connect to PostgreSQL: " + msg));
  }
  // Keep server notices (e.g. "relation already exists, skipping") off stderr.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  // Behind a transaction pooler a session setting would land on whichever
  // server session served this statement (another client's next), and no
  // statement is prepared by name there anyway.
  if (transaction_pooler) return std::unique_ptr<Connection>(new Connection(c, true, true));
  // Prepared statements skip parsing, but are planned on every execution: a
  // cached generic plan made while a table was small (a fresh deployment)
  // would keep scanning it whole as it grows.
  PGresult* set = PQexec(c, std::string(sql::session::custom_plans).c_str());
  const bool ok = PQresultStatus(set) == PGRES_COMMAND_OK;
  PQclear(set);
  if (!ok) {
    std::string msg = PQerrorMessage(c);
    PQfinish(c);
    return fail(Error::unavailable("cannot connect to the database; retry",
                                   "configuring the session: " + msg));
  }
  return std::unique_ptr<Connection>(new Connection(c, true));
}

std::unique_ptr<Connection> Connection::borrow(PGconn* conn) {
  return std::unique_ptr<Connection>(new Connection(conn, false));
}

Connection::~Connection() {
  if (owned_ && conn_) PQfinish(conn_);
}

bool Connection::healthy() const {
  // conn_ is null after a pipeline left the protocol in an unknown state.
  return conn_ && PQstatus(conn_) == CONNECTION_OK;
}

bool Connection::in_transaction() const {
  auto s = PQtransactionStatus(conn_);
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

Result<PgResult> Connection::exec(std::string_view text, const Params& params) {
  const std::string sql(text);
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

Result<std::vector<PgResult>> Connection::exec_pipeline(const std::vector<Statement>& statements) {
  // A borrowed session is the caller's: its prepared statements are not ours
  // to track, so statements are sent unprepared there.
  // Behind a transaction pooler nothing is prepared by name (the next
  // transaction may run on another server session), and the planner
  // settings (pipeline::frame) are set for the pipeline's transaction only.
  const bool prepare = owned_ && !pooled_;
  if (statements.size() == 1 && !(statements.front().prepared() && prepare) &&
      !(pooled_ && statements.front().keyed())) {
    auto r = exec(statements.front().sql, statements.front().params);
    if (!r) return fail(r.error());
    return std::vector<PgResult>{std::move(*r)};
  }
  // Outside a caller's transaction, the pipeline's sync point commits it.
  const bool commits = !in_transaction();
  if (PQenterPipelineMode(conn_) != 1) {
    return fail(classify_pg_error(nullptr, conn_, "entering pipeline mode"));
  }
  std::vector<pipeline::Step> steps = pipeline::frame(statements, owned_, pooled_);
  pipeline::Sent sent = pipeline::send(conn_, steps, prepare, prepared_, next_prepared_);
  pipeline::Collected got;
  if (!sent.error) got = pipeline::collect(conn_, steps);
  const std::optional<Error> first_error = sent.error ? sent.error : got.first_error;
  // Outside a transaction the sync point is the commit: sent, and the
  // connection broke before its answer came.
  if (commits && !sent.error && first_error && PQstatus(conn_) != CONNECTION_OK) {
    note_commit_in_doubt("a pipeline's sync point");
  }
  // A statement is known to the session only once its prepare succeeded
  // (names are never reused, so one prepared but unconfirmed is harmless).
  for (const auto& sql : sent.fresh) {
    if (!got.confirmed.contains(sql)) prepared_.erase(sql);
  }
  if (PQexitPipelineMode(conn_) != 1) {
    // Results left unread: this connection's protocol state is unknown, so
    // it must not be reused (a borrowed one is the caller's to discard).
    if (owned_) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    return fail(first_error.value_or(Error::unavailable("the database connection failed; retry",
                                                        "could not leave pipeline mode")));
  }
  if (first_error) return fail(*first_error);
  return std::move(got.results);
}

Result<PgResult> Connection::exec_prepared(std::string_view sql, const Params& params) {
  auto r = exec_pipeline({Statement{sql, params, Plan::kPrepared}});
  if (!r) return fail(r.error());
  return std::move(r->front());
}

Result<PgResult> Connection::exec_keyed(std::string_view sql, const Params& params) {
  auto r = exec_pipeline({Statement{sql, params, Plan::kKeyed}});
  if (!r) return fail(r.error());
  return std::move(r->front());
}

Result<bool> Connection::wait_notification(std::chrono::milliseconds timeout) {
  auto drain = [&] {
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      any = true;
      PQfreemem(n);
    }
    return any;
  };
  if (!healthy()) return fail(classify_pg_error(nullptr, conn_, "waiting for a notification"));
  if (drain()) return true;
  pollfd pfd{PQsocket(conn_), POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) {
    return fail(Error::unavailable(
        "the database connection failed; retry",
        fmt::format("poll on the notification socket: {}", std::strerror(errno))));
  }
  if (ready > 0 && PQconsumeInput(conn_) != 1) {
    return fail(classify_pg_error(nullptr, conn_, "reading notifications"));
  }
  return drain();
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
  if (!r) {
    if (!conn_->healthy()) note_commit_in_doubt("COMMIT");
    return fail(r.error());
  }
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
