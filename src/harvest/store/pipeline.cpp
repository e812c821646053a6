#include <harvest/store/pg_error.hpp>
#include <harvest/store/pipeline.hpp>
#include <harvest/store/sql/session.hpp>

namespace harvest::store::pipeline {

std::vector<Step> frame(const std::vector<Statement>& statements, bool owned, bool pooled) {
  // Plan::kKeyed statements run between two set_config calls (results
  // dropped). SET is transactional: if the pipeline's transaction aborts
  // before the second call, the first is undone with it.
  static const Statement kKeyedOn{sql::session::keyed_on, {}, Plan::kPrepared};
  static const Statement kKeyedOff{sql::session::keyed_off, {}, Plan::kPrepared};
  // The pooled forms: local to the pipeline's transaction (implicit, or the
  // caller's), so they never outlive it on a shared server session.
  static const Statement kKeyedOnLocal{sql::session::keyed_on_local, {}};
  static const Statement kKeyedOffLocal{sql::session::keyed_off_local, {}};
  const Statement& keyed_on = pooled ? kKeyedOnLocal : kKeyedOn;
  const Statement& keyed_off = pooled ? kKeyedOffLocal : kKeyedOff;
  std::vector<Step> steps;
  // The settings are switched on before the first of a run of keyed
  // statements and off after its last (on a borrowed session, never).
  bool keyed = false;
  for (const auto& st : statements) {
    const bool want = owned && st.keyed();
    if (want != keyed) {
      steps.push_back(Step{want ? &keyed_on : &keyed_off, /*injected=*/true});
      keyed = want;
    }
    steps.push_back(Step{&st, /*injected=*/false});
  }
  if (keyed) steps.push_back(Step{&keyed_off, /*injected=*/true});
  return steps;
}

Sent send(PGconn* conn, std::vector<Step>& steps, bool prepare,
          std::map<std::string, std::string>& prepared, uint64_t& next_prepared) {
  Sent sent;
  for (auto& step : steps) {
    const Statement& st = *step.statement;
    std::vector<const char*> values;
    values.reserve(st.params.size());
    for (const auto& p : st.params) values.push_back(p ? p->c_str() : nullptr);
    int ok = 0;
    if (st.prepared() && prepare) {
      auto it = prepared.find(st.sql);
      if (it == prepared.end()) {
        // Recorded as prepared now, so a repeat of the same text later in
        // this pipeline uses this name; the Connection forgets it again if
        // the prepare does not succeed (collect() confirms it).
        std::string name = "harvest_" + std::to_string(next_prepared++);
        if (PQsendPrepare(conn, name.c_str(), st.sql.c_str(), 0, nullptr) != 1) {
          sent.error = classify_pg_error(nullptr, conn, "preparing a pipelined statement");
          return sent;
        }
        step.preparing = true;
        it = prepared.emplace(st.sql, std::move(name)).first;
        sent.fresh.push_back(st.sql);
      }
      ok = PQsendQueryPrepared(conn, it->second.c_str(), static_cast<int>(values.size()),
                               values.data(), nullptr, nullptr, 0);
    } else {
      ok = PQsendQueryParams(conn, st.sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
    }
    if (ok != 1) {
      sent.error = classify_pg_error(nullptr, conn, "sending a pipelined statement");
      return sent;
    }
  }
  if (PQpipelineSync(conn) != 1) {
    sent.error = classify_pg_error(nullptr, conn, "syncing a pipeline");
  }
  return sent;
}

Collected collect(PGconn* conn, const std::vector<Step>& steps) {
  Collected got;
  // Each statement yields its result then a NULL; the sync yields
  // PGRES_PIPELINE_SYNC. Statements after a failure come back aborted.
  for (const auto& step : steps) {
    if (step.preparing) {
      PGresult* prep = PQgetResult(conn);
      if (prep == nullptr) {
        got.first_error =
            got.first_error.value_or(classify_pg_error(nullptr, conn, "pipeline result"));
        break;
      }
      if (PQresultStatus(prep) == PGRES_COMMAND_OK) {
        got.confirmed.insert(step.statement->sql);
      } else if (!got.first_error) {
        got.first_error =
            classify_pg_error(PQresultStatus(prep) == PGRES_PIPELINE_ABORTED ? nullptr : prep, conn,
                              "preparing a pipelined statement");
      }
      PQclear(prep);
      while (PGresult* extra = PQgetResult(conn)) PQclear(extra);  // the NULL terminator
    }
    PGresult* r = PQgetResult(conn);
    if (r == nullptr) {
      got.first_error =
          got.first_error.value_or(classify_pg_error(nullptr, conn, "pipeline result"));
      break;
    }
    PgResult result(r);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && !got.first_error) {
      got.first_error = classify_pg_error(status == PGRES_PIPELINE_ABORTED ? nullptr : r, conn,
                                          "pipelined query failed");
    }
    if (!step.injected) got.results.push_back(std::move(result));
    while (PGresult* extra = PQgetResult(conn)) PQclear(extra);  // the NULL terminator
  }
  // Drain to the sync point.
  while (PGresult* r = PQgetResult(conn)) {
    const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (sync) break;
  }
  return got;
}

}  // namespace harvest::store::pipeline
