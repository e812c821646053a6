// The three steps of Connection::exec_pipeline (pg.cpp), which sends a batch
// of statements in one round trip of libpq's pipeline mode:
//   frame()   decides what is sent, in order: the caller's statements, with
//             the planner settings of Plan::kKeyed injected around them;
//   send()    sends each one (preparing it first where needed), then the
//             sync point;
//   collect() reads the answers back in the same order, keeping only the
//             caller's statements' results.
// Entering and leaving pipeline mode, the commits-in-doubt count and the
// session's record of prepared names stay with the Connection, which owns
// them. Internal to store.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::store::pipeline {

// One statement as sent.
struct Step {
  // The caller's statement (kept by the caller for the whole call), or one of
  // the injected planner settings (static).
  const Statement* statement;
  // An injected planner setting: its result is read and dropped.
  bool injected = false;
  // Prepared by this pipeline (set by send()): its PQsendPrepare result comes
  // first and is read (and dropped) before the statement's own.
  bool preparing = false;
};

// The statements to send, in order. `owned`: the session is the
// Connection's own (not borrowed); `pooled`: it is behind a transaction
// pooler. Keeps pointers into `statements`.
[[nodiscard]] std::vector<Step> frame(const std::vector<Statement>& statements, bool owned,
                                      bool pooled);

// What send() did.
struct Sent {
  // SQL texts prepared by this pipeline, added to the session's names before
  // their prepare was confirmed.
  std::vector<std::string> fresh;
  // Set when a statement or the sync point could not be sent: nothing after
  // it was sent, and no result is to be read.
  std::optional<Error> error;
};

// Sends `steps` on `conn` (in pipeline mode), then the sync point. With
// `prepare`, a prepared statement is sent by the name `prepared` gives its
// SQL text, and one not there yet is prepared first under the name
// "harvest_<next_prepared>" and added to `prepared` (its step is marked
// `preparing`); without it every statement is sent with its text.
[[nodiscard]] Sent send(PGconn* conn, std::vector<Step>& steps, bool prepare,
                        std::map<std::string, std::string>& prepared, uint64_t& next_prepared);

// What collect() read.
struct Collected {
  // The caller's statements' results, in order (injected ones dropped).
  std::vector<PgResult> results;
  // The first failure: a prepare or a statement that failed, or the
  // connection breaking before every answer came.
  std::optional<Error> first_error;
  // The SQL texts of `preparing` steps whose prepare succeeded.
  std::set<std::string> confirmed;
};

// Reads the answers to everything send() sent, in order, through the sync
// point. Call only when send() sent it all (no Sent::error).
[[nodiscard]] Collected collect(PGconn* conn, const std::vector<Step>& steps);

}  // namespace harvest::store::pipeline
