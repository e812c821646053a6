#include <fmt/format.h>

#include <string>

#include <harvest/store/pg_error.hpp>

namespace harvest::store {

namespace {

struct Mapping {
  ErrorKind kind;
  const char* message;
  RetryClass retry = default_retry_class(kind);
};

Mapping map_sqlstate(std::string_view s) {
  const std::string_view cls = s.substr(0, 2);
  // Transient: the same statement may succeed once the database recovers.
  // Unavailable: the server is gone or going (connection failures, shutdown,
  // crash recovery, not yet accepting connections); every statement fails
  // alike until it is back.
  if (cls == "08") {
    return {ErrorKind::kTransient, "the database connection failed; retry",
            RetryClass::kUnavailable};
  }
  if (s == "57P01" || s == "57P02" || s == "57P03") {
    return {ErrorKind::kTransient, "the database is shutting down or restarting; retry",
            RetryClass::kUnavailable};
  }
  // A database refusing every write is an outage for a writer, not a fault
  // of the data: a primary set read-only while a failover is under way, a
  // standby reached before promotion (25006), a full disk (53100).
  if (s == "25006") {
    return {ErrorKind::kTransient,
            "the database accepts no writes now (read-only, or a standby during a failover); "
            "retry",
            RetryClass::kUnavailable};
  }
  if (s == "53100") {
    return {ErrorKind::kTransient, "the database is out of disk space; retry",
            RetryClass::kUnavailable};
  }
  if (cls == "40") {
    return {ErrorKind::kTransient,
            "the database aborted the transaction (serialization failure or deadlock); retry"};
  }
  if (cls == "53") return {ErrorKind::kTransient, "the database is out of resources; retry"};
  if (cls == "57") {
    return {ErrorKind::kTransient,
            "the database is shutting down, restarting or cancelled the statement; retry"};
  }
  if (cls == "58") return {ErrorKind::kTransient, "the database hit a system error; retry"};
  if (s == "55P03" || s == "55006") {
    return {ErrorKind::kTransient, "a database lock is not available; retry"};
  }
  // Permanent: the same data fails the same way every time.
  if (s == "23505") return {ErrorKind::kConflict, "the request conflicts with a stored record"};
  if (cls == "23") {
    return {ErrorKind::kBadRequest, "the database refused the data (an integrity constraint)"};
  }
  if (cls == "22") {
    return {ErrorKind::kBadRequest,
            "the database refused a value (invalid text, number or JSON for its type)"};
  }
  if (cls == "54") {
    return {ErrorKind::kBadRequest,
            "a value exceeds a database limit (too long, too large or nested too deep)"};
  }
  if (cls == "42") return {ErrorKind::kInternal, "the database refused a statement of harvest's"};
  return {ErrorKind::kInternal, "the database failed unexpectedly"};
}

}  // namespace

Error error_for_sqlstate(std::string_view sqlstate, std::string_view server_text,
                         std::string_view context) {
  const Mapping m = map_sqlstate(sqlstate);
  return Error{m.kind, m.message,
               fmt::format("{}: {} (SQLSTATE {})", context, server_text, sqlstate), m.retry};
}

Error classify_pg_error(const PGresult* res, PGconn* conn, std::string_view context) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string text = res ? PQresultErrorMessage(res) : "";
  if (text.empty() && conn) text = PQerrorMessage(conn);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  // No server answer, or the connection broke underneath: a connection-level
  // failure, whatever the result says.
  if (!state || (conn && PQstatus(conn) == CONNECTION_BAD)) {
    return Error::unavailable("the database is unavailable; retry",
                              fmt::format("{}: {}", context, text));
  }
  return error_for_sqlstate(state, text, context);
}

}  // namespace harvest::store
