#include "cli/cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "plugin/migrations.hpp"
#include "store/migrations.hpp"
#include "store/pg.hpp"

namespace harvest::cli {

namespace {

std::string resolve_url(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* v = std::getenv("HARVEST_HARVEST_DATABASE_URL")) return v;
  if (const char* v = std::getenv("HARVEST_DATABASE_URL")) return v;
  return {};
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"harvest: durable workflows on PostgreSQL, started from Kafka and SQS"};
  app.require_subcommand(1);
  std::string url_flag;
  app.add_option("--database-url", url_flag,
                 "harvest database URL (default: $HARVEST_HARVEST_DATABASE_URL, then "
                 "$HARVEST_DATABASE_URL)");
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");

  auto* migrate = app.add_subcommand("migrate", "apply pending migrations of every module");
  bool dry_run = false;
  migrate->add_flag("--dry-run", dry_run, "only list pending migrations");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream o, er;
    int rc = app.exit(e, o, er);
    out << o.str();
    err << er.str();
    return rc == 0 ? 0 : 2;
  }

  std::string url = resolve_url(url_flag);
  if (url.empty()) {
    err << "error: no database: pass --database-url or set HARVEST_DATABASE_URL\n";
    return 2;
  }
  auto conn = store::Connection::open(url);
  if (!conn) {
    err << "error: " << conn.error().message << "\n";
    return 1;
  }

  if (migrate->parsed()) {
    auto sets = plugin::all_migration_sets();
    if (dry_run) {
      auto pending = store::pending_migrations(**conn, sets);
      if (!pending) {
        err << "error: " << pending.error().message << "\n";
        return 1;
      }
      if (json) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& p : *pending) arr.push_back(p.label());
        out << nlohmann::json{{"pending", arr}}.dump() << "\n";
      } else {
        for (const auto& p : *pending) out << "pending  " << p.label() << "\n";
        if (pending->empty()) out << "up to date\n";
      }
      return 0;
    }
    auto applied = store::apply_migrations(**conn, sets);
    if (!applied) {
      err << "error: " << applied.error().message << "\n";
      return 1;
    }
    if (json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : *applied) arr.push_back(p.label());
      out << nlohmann::json{{"applied", arr}}.dump() << "\n";
    } else {
      for (const auto& p : *applied) out << "applied  " << p.label() << "\n";
      if (applied->empty()) out << "up to date\n";
    }
    return 0;
  }
  return 2;
}

}  // namespace harvest::cli
