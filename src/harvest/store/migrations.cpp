#include <fmt/format.h>

#include <set>

#include <harvest/common/log.hpp>
#include <harvest/store/migrations.hpp>
#include <harvest/store/pg.hpp>
#include <harvest/store/sql/migrations.hpp>

namespace harvest::store {

namespace {

Result<std::set<std::pair<std::string, int>>> applied(Connection& conn) {
  auto exists = conn.exec(sql::migrations::ledger_exists);
  if (!exists) return fail(exists.error());
  std::set<std::pair<std::string, int>> out;
  if (!exists->get_bool(0, "present")) return out;
  auto rows = conn.exec(sql::migrations::applied);
  if (!rows) return fail(rows.error());
  for (int i = 0; i < rows->rows(); ++i) {
    out.emplace(rows->get(i, "set_name"), static_cast<int>(rows->get_int(i, "version")));
  }
  return out;
}

}  // namespace

std::string PendingMigration::label() const {
  return fmt::format("{}/{:04d}_{}", set_name, version, name);
}

Result<std::vector<PendingMigration>> pending_migrations(Connection& conn,
                                                         const std::vector<MigrationSet>& sets) {
  auto done = applied(conn);
  if (!done) return fail(done.error());
  std::vector<PendingMigration> out;
  for (const auto& set : sets) {
    for (const auto& m : set.migrations) {
      if (!done->contains({set.name, m.version})) out.push_back({set.name, m.version, m.name});
    }
  }
  return out;
}

Result<std::vector<PendingMigration>> apply_migrations(Connection& conn,
                                                       const std::vector<MigrationSet>& sets) {
  // Each migration commits in its own transaction, which first takes a
  // transaction-scoped lock and re-reads the ledger: concurrent migrators
  // apply each migration once, and no lock outlives its transaction — a
  // session lock taken through a pooler in transaction mode would stay on
  // whichever server session it landed on.
  std::vector<PendingMigration> done_now;
  while (true) {
    auto tx = Transaction::begin(conn);
    if (!tx) return fail(tx.error());
    if (auto r = conn.exec(sql::migrations::lock); !r) {
      return fail(r.error());
    }
    if (auto r = conn.exec(sql::migrations::create_ledger); !r) return fail(r.error());
    auto pending = pending_migrations(conn, sets);
    if (!pending) return fail(pending.error());
    if (pending->empty()) {
      if (auto c = tx->commit(); !c) return fail(c.error());
      return done_now;
    }
    const PendingMigration& p = pending->front();
    const Migration* m = nullptr;
    for (const auto& set : sets) {
      if (set.name != p.set_name) continue;
      for (const auto& candidate : set.migrations) {
        if (candidate.version == p.version) m = &candidate;
      }
    }
    if (auto r = conn.exec_script(m->sql); !r) {
      return fail(Error{r.error().kind,
                        fmt::format("migration {} failed: {}", p.label(), r.error().message),
                        r.error().detail, r.error().retry});
    }
    auto rec = conn.exec(sql::migrations::record, {p.set_name, std::to_string(p.version), p.name});
    if (!rec) return fail(rec.error());
    if (auto c = tx->commit(); !c) return fail(c.error());
    log::info("applied migration {}", p.label());
    done_now.push_back(p);
  }
}

}  // namespace harvest::store
