#include <libpq-fe.h>

#include <memory>

#include <harvest/store/conninfo.hpp>

namespace harvest::store {

std::string location_of(const std::string& conninfo) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> opts(
      PQconninfoParse(conninfo.c_str(), &err), &PQconninfoFree);
  if (err) PQfreemem(err);  // may quote the string, secrets included: never shown
  if (!opts) return "<unparsable connection string>";
  std::string host, hostaddr, port, db;
  for (auto* o = opts.get(); o->keyword; ++o) {
    if (!o->val) continue;
    std::string_view k(o->keyword);
    if (k == "host") host = o->val;
    if (k == "hostaddr") hostaddr = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
  }
  if (host.empty()) host = hostaddr.empty() ? "localhost" : hostaddr;
  return host + ":" + (port.empty() ? "5432" : port) + "/" + db;
}

}  // namespace harvest::store
