// The connector dead letters as an operator surface: every
// statement on `harvest_connector_dead_letters` besides the sink's insert.
//
//   list / show      read rows, newest first, by filter or id
//   request_replay   mark matching rows for replay (who, when)
//   purge            delete matching rows (an empty filter is refused)
//   claim / record   the binding runtime's side of a replay: take marked
//                    rows of one binding, then record what the replay did
//
// Replay happens where the binding runs: only its process holds the mapper.
// The API and the CLI therefore only mark rows; the binding's
// ConnectorRuntime picks them up and dispatches the stored payload under
// the row's original dedupe key, so a replay run twice, or a replay of a
// message that meanwhile started, reaches at most one execution.
//
// Inputs are checked before any SQL runs (`check`): a bad value is a
// bad_request naming the field. Database errors keep their kind (transient,
// internal); the API answers those without quoting the database.
//
// The schema is the connector's migration set (src/harvest/connector/migrations).
// Thread-safe: every call borrows its own pooled connection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::connector_dlq {

// Bounds of every operator input (documented in docs/operations.md and
// docs/openapi.yaml).
inline constexpr size_t kMaxListLimit = 1000;  // list: 1..1000, default 100
inline constexpr size_t kDefaultListLimit = 100;
inline constexpr size_t kMaxReplayBatch = 1000;  // rows marked per replay request
inline constexpr size_t kMaxFilterText = 256;    // binding, stream: bytes
inline constexpr size_t kMaxRequestedBy = 200;   // replay requested_by: bytes

// The reasons the runtime records (CON-10), and a coordinate collision a
// binding with on_collision(dead_letter) records, when a record reuses an earlier record's position
// (a recreated topic, another cluster).
inline constexpr std::string_view kReasons[] = {"undecodable", "mapping_rejected", "start_rejected",
                                                "coordinate_collision"};

// Which rows an operation applies to. Every set criterion must match; an
// unset one matches everything. `since`/`until` bound failed_at (since
// inclusive, until exclusive) as RFC 3339 timestamps with an offset or Z.
struct DeadLetterFilter {
  std::optional<std::string> id;  // the row's uuid
  std::optional<std::string> binding;
  std::optional<std::string> stream;
  std::optional<std::string> reason;  // one of kReasons
  std::optional<std::string> since;
  std::optional<std::string> until;

  [[nodiscard]] bool empty() const {
    return !id && !binding && !stream && !reason && !since && !until;
  }
};

// A bad_request naming the first field that is out of bounds, if any.
[[nodiscard]] Status check(const DeadLetterFilter& filter);

// What a replay did (replay_outcome).
enum class ReplayOutcome {
  kStarted,       // a new execution started (or the signal reached an entity run)
  kExisting,      // the dedupe key already had its execution: nothing new ran
  kDeferred,      // accepted under deferred admission (throttled workflow)
  kDeadLettered,  // failed again: replay_detail holds the new reason and detail
};
[[nodiscard]] std::string_view to_string(ReplayOutcome outcome);

struct StoredDeadLetter {
  std::string id;
  std::string binding;
  std::string stream;
  std::string coordinates;  // rendered, for people
  // The same coordinates structured (connector/coordinates.hpp's JSON form),
  // as the runtime reads them back for a replay; unset for a row whose
  // rendered text could not be read when it was backfilled.
  std::optional<std::string> coordinates_structured;
  std::string idempotency_key;
  std::string reason;
  std::string detail;
  int attempts = 0;
  std::string failed_at;  // RFC 3339, UTC
  std::string payload;    // raw bytes
  // The record key (raw bytes) and headers (name, raw value) the message
  // carried; unset / empty for rows written before they were stored.
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::string>> headers;
  // The record's fingerprint (Kafka); unset for SQS and for older rows.
  std::optional<int64_t> fingerprint;
  // Replay bookkeeping; unset until requested / replayed.
  std::optional<std::string> replay_requested_at;
  std::optional<std::string> replay_requested_by;
  std::optional<std::string> replayed_at;
  std::optional<std::string> replay_outcome;
  std::optional<std::string> replay_detail;
  std::optional<std::string> replay_execution_id;
};

// What a replay request changed. A row is counted once: newly marked (or
// re-marked after its last replay dead-lettered again), already waiting for
// its runtime, or already replayed (a no-op).
struct ReplayRequest {
  size_t requested = 0;
  size_t already_requested = 0;
  size_t already_replayed = 0;
};

// One page of DeadLetterStore::list_page.
struct DeadLetterPage {
  std::vector<StoredDeadLetter> items;     // newest failed_at first
  std::optional<std::string> next_cursor;  // absent on the last page
};

class DeadLetterStore {
 public:
  // Keeps a reference to `pool` (the engine's first shard, which holds the
  // connector's tables); it must outlive the store.
  explicit DeadLetterStore(store::Pool& pool) : pool_(pool) {}

  // Rows matching `filter`, newest failed_at first, at most `limit`
  // (1..kMaxListLimit). Payloads included.
  [[nodiscard]] Result<std::vector<StoredDeadLetter>> list(const DeadLetterFilter& filter,
                                                           size_t limit = kDefaultListLimit);
  // The same, a page at a time: `cursor` is the previous page's
  // next_cursor (a malformed one is a bad request).
  [[nodiscard]] Result<DeadLetterPage> list_page(const DeadLetterFilter& filter, size_t limit,
                                                 const std::optional<std::string>& cursor);
  // The row `id`; not_found when there is none, bad_request for a non-uuid.
  [[nodiscard]] Result<StoredDeadLetter> show(const std::string& id);
  // Marks the rows matching `filter` (at most kMaxReplayBatch newly marked,
  // newest first) as requested by `requested_by` now. A row already
  // replayed successfully is left alone (replaying it again is a no-op); a
  // row whose replay dead-lettered again is marked anew. Refuses an empty
  // filter or an empty requested_by (bad_request).
  [[nodiscard]] Result<ReplayRequest> request_replay(const DeadLetterFilter& filter,
                                                     const std::string& requested_by);
  // Deletes the rows matching `filter`; how many. Refuses an empty filter.
  [[nodiscard]] Result<size_t> purge(const DeadLetterFilter& filter);

  // The runtime's side: up to `limit` rows of `binding` marked and not yet
  // replayed, oldest request first.
  [[nodiscard]] Result<std::vector<StoredDeadLetter>> claim(const std::string& binding,
                                                            size_t limit);
  // Records the replay of row `id` (only once: a row already recorded is
  // left alone, and the answer says whether this call recorded it).
  [[nodiscard]] Result<bool> record(const std::string& id, ReplayOutcome outcome,
                                    const std::string& detail,
                                    const std::optional<std::string>& execution_id);

 private:
  store::Pool& pool_;
};

}  // namespace harvest::connector_dlq
