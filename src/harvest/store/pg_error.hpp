// PostgreSQL failures translated into harvest errors: the only place that
// reads a SQLSTATE (CONVENTIONS: a library's codes stay inside its adapter).
//
// Every SQLSTATE class is mapped deliberately to a retry class:
//   unavailable 08 connection, 57P01/57P02/57P03 (admin or crash shutdown,
//              cannot connect now), 25006 (read-only: a standby, or a primary
//              fenced for a failover), 53100 (disk full) and any failure
//              without a server answer: every write fails alike until the
//              server is back;
//   transient  40 transaction rollback (40001 serialization, 40P01
//              deadlock), the rest of 53 insufficient resources, the rest
//              of 57 operator intervention (cancel, statement timeout), 58
//              system I/O,
//              55P03/55006 lock not available / object in use;
//   permanent  22 data exception, 23 integrity (23505 unique violation is a
//              conflict), 54 program limit, 42 syntax or access, 0A feature
//              not supported, XX internal and everything else.
// The error's message is generic and safe to show a caller; the server's own
// text and the SQLSTATE go to its detail, for the log.
#pragma once

#include <libpq-fe.h>

#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest::store {

// The error a statement failing with `sqlstate` becomes. `server_text` (the
// server's message) and `context` (what harvest was doing) go to the detail.
[[nodiscard]] Error error_for_sqlstate(std::string_view sqlstate, std::string_view server_text,
                                       std::string_view context);

// The error for a failed result or connection: reads the SQLSTATE of `res`,
// or treats a missing answer / broken connection as unavailable.
[[nodiscard]] Error classify_pg_error(const PGresult* res, PGconn* conn, std::string_view context);

}  // namespace harvest::store
