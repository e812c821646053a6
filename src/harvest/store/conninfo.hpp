// PostgreSQL connection strings, parsed by libpq itself (PQconninfoParse):
// URL form (postgresql://user:secret@host:5432/db?...) and keyword form
// (host=... password=...) alike. The one place harvest reads them.
#pragma once

#include <string>
#include <string_view>

namespace harvest::store {

// "host:port/dbname" of a connection string, without user, password or
// options; what harvest shows of a database (health, shard lists, logs).
// A string libpq cannot parse is shown as "<unparsable connection string>".
[[nodiscard]] std::string location_of(const std::string& conninfo);

}  // namespace harvest::store
