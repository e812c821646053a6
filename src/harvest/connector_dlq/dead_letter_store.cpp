#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include <harvest/common/ids.hpp>
#include <harvest/common/json.hpp>
#include <harvest/common/strings.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>
#include <harvest/connector_dlq/sql/dead_letters.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::connector_dlq {

namespace {

// A failed operator query on a database whose connector migrations were
// never applied (an application without connector bindings, say): a clear
// not-found naming what to run, rather than the database's own words.
Error explained(store::Connection& conn, Error e) {
  if (is_unavailable(e)) return e;
  auto missing = conn.exec(sql::dead_letters::table_missing);
  if (missing && missing->rows() == 1 && missing->get(0, 0) == "t") {
    return Error::not_found(
        "this database has no connector dead letters: the connector migrations were never "
        "applied to it. Run `harvest migrate` against it, or start an application with a "
        "connector binding, which applies them");
  }
  return e;
}

store::Params filter_params(const DeadLetterFilter& f) {
  return {f.id, f.binding, f.stream, f.reason, f.since, f.until};
}

std::string from_hex(const std::string& hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    return c - 'a' + 10;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>((nibble(hex[i]) << 4) | nibble(hex[i + 1]));
  }
  return out;
}

std::vector<StoredDeadLetter> rows_of(const store::PgResult& r) {
  std::vector<StoredDeadLetter> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(StoredDeadLetter{
        .id = r.get(i, "id"),
        .binding = r.get(i, "binding"),
        .stream = r.get(i, "stream"),
        .coordinates = r.get(i, "coordinates"),
        .coordinates_structured = r.get_opt(i, "coordinates_structured"),
        .idempotency_key = r.get(i, "idempotency_key"),
        .reason = r.get(i, "reason"),
        .detail = r.get(i, "detail"),
        .attempts = static_cast<int>(r.get_int(i, "attempts")),
        .failed_at = r.get(i, "failed"),
        .payload = from_hex(r.get(i, "payload_hex")),
        .key = std::nullopt,
        .headers = {},
        .fingerprint = std::nullopt,
        .replay_requested_at = r.get_opt(i, "requested"),
        .replay_requested_by = r.get_opt(i, "replay_requested_by"),
        .replayed_at = r.get_opt(i, "replayed"),
        .replay_outcome = r.get_opt(i, "replay_outcome"),
        .replay_detail = r.get_opt(i, "replay_detail"),
        .replay_execution_id = r.get_opt(i, "replay_execution_id"),
    });
    StoredDeadLetter& d = out.back();
    if (auto key = r.get_opt(i, "key_hex")) d.key = from_hex(*key);
    if (auto fp = r.get_opt(i, "fingerprint")) d.fingerprint = std::stoll(*fp);
    if (auto headers = r.get_opt(i, "headers")) {
      // Written by the sink (connector/dead_letter.cpp); a row edited by
      // hand into another shape shows no headers rather than failing.
      const Json stored = Json::parse(*headers, nullptr, false);
      if (stored.is_array()) {
        for (const auto& h : stored) {
          if (!h.is_object() || !h.value("name", Json()).is_string() ||
              !h.value("value_hex", Json()).is_string()) {
            continue;
          }
          d.headers.emplace_back(h["name"].get<std::string>(),
                                 from_hex(h["value_hex"].get<std::string>()));
        }
      }
    }
  }
  return out;
}

Status check_text(const std::optional<std::string>& v, std::string_view field) {
  if (!v) return {};
  if (v->empty() || v->size() > kMaxFilterText || !is_valid_utf8(*v) ||
      v->find('\0') != std::string::npos) {
    return fail(Error::bad_request(
        fmt::format("'{}' must be 1 to {} bytes of UTF-8 text", field, kMaxFilterText)));
  }
  return {};
}

Status refuse_empty(const DeadLetterFilter& f, std::string_view what) {
  if (!f.empty()) return {};
  return fail(Error::bad_request(fmt::format(
      "{} needs an explicit filter: at least one of id, binding, stream, reason, since, until",
      what)));
}

}  // namespace

std::string_view to_string(ReplayOutcome outcome) {
  switch (outcome) {
    case ReplayOutcome::kStarted:
      return "started";
    case ReplayOutcome::kExisting:
      return "existing";
    case ReplayOutcome::kDeferred:
      return "deferred";
    case ReplayOutcome::kDeadLettered:
      return "dead_lettered";
  }
  return "unknown";
}

Status check(const DeadLetterFilter& f) {
  if (f.id && !is_uuid(*f.id)) {
    return fail(Error::bad_request("'id' must be a dead letter's id (a uuid)"));
  }
  if (auto ok = check_text(f.binding, "binding"); !ok) return ok;
  if (auto ok = check_text(f.stream, "stream"); !ok) return ok;
  if (f.reason && std::ranges::find(kReasons, *f.reason) == std::end(kReasons)) {
    return fail(
        Error::bad_request("'reason' must be one of undecodable, mapping_rejected, start_rejected, "
                           "coordinate_collision"));
  }
  for (const auto& [v, field] : {std::pair{&f.since, "since"}, std::pair{&f.until, "until"}}) {
    if (*v && !is_timestamp(**v)) {
      return fail(Error::bad_request(
          fmt::format("'{}' must be an RFC 3339 timestamp such as 2026-12-04T06:00:00Z", field)));
    }
  }
  return {};
}

Result<std::vector<StoredDeadLetter>> DeadLetterStore::list(const DeadLetterFilter& filter,
                                                            size_t limit) {
  if (auto ok = check(filter); !ok) return fail(ok.error());
  if (limit == 0 || limit > kMaxListLimit) {
    return fail(
        Error::bad_request(fmt::format("'limit' must be an integer from 1 to {}", kMaxListLimit)));
  }
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto params = filter_params(filter);
  params.emplace_back(std::to_string(limit));
  auto r = (*conn)->exec(sql::dead_letters::list, params);
  if (!r) return fail(explained(**conn, r.error()));
  return rows_of(*r);
}

Result<DeadLetterPage> DeadLetterStore::list_page(const DeadLetterFilter& filter, size_t limit,
                                                  const std::optional<std::string>& cursor) {
  if (auto ok = check(filter); !ok) return fail(ok.error());
  if (limit == 0 || limit > kMaxListLimit) {
    return fail(
        Error::bad_request(fmt::format("'limit' must be an integer from 1 to {}", kMaxListLimit)));
  }
  // "<failed_at in microseconds since the epoch>|<id>", as list_executions.
  std::optional<std::string> after_us, after_id;
  if (cursor) {
    const auto bar = cursor->find('|');
    if (bar != std::string::npos) {
      after_us = cursor->substr(0, bar);
      after_id = cursor->substr(bar + 1);
    }
    if (!after_us || after_us->empty() || after_us->size() > 18 ||
        after_us->find_first_not_of("0123456789") != std::string::npos || !is_uuid(*after_id)) {
      return fail(
          Error::bad_request("'cursor' is malformed: pass the next_cursor of the previous page"));
    }
  }
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto params = filter_params(filter);
  params.emplace_back(std::to_string(limit + 1));
  params.emplace_back(after_us);
  params.emplace_back(after_id);
  auto r = (*conn)->exec(sql::dead_letters::list_page, params);
  if (!r) return fail(explained(**conn, r.error()));
  DeadLetterPage page{.items = rows_of(*r), .next_cursor = std::nullopt};
  if (page.items.size() > limit) {
    page.items.resize(limit);
    page.next_cursor = fmt::format("{}|{}", r->get(static_cast<int>(limit) - 1, "failed_us"),
                                   page.items.back().id);
  }
  return page;
}

Result<StoredDeadLetter> DeadLetterStore::show(const std::string& id) {
  DeadLetterFilter f{.id = id};
  auto rows = list(f, 1);
  if (!rows) return fail(rows.error());
  if (rows->empty()) return fail(Error::not_found("no connector dead letter with id " + id));
  return std::move(rows->front());
}

Result<ReplayRequest> DeadLetterStore::request_replay(const DeadLetterFilter& filter,
                                                      const std::string& requested_by) {
  if (auto ok = refuse_empty(filter, "replay"); !ok) return fail(ok.error());
  if (auto ok = check(filter); !ok) return fail(ok.error());
  if (requested_by.empty() || requested_by.size() > kMaxRequestedBy ||
      !is_valid_utf8(requested_by) || requested_by.find('\0') != std::string::npos) {
    return fail(Error::bad_request(
        fmt::format("'requested_by' must be 1 to {} bytes of UTF-8 text", kMaxRequestedBy)));
  }
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto params = filter_params(filter);
  params.emplace_back(requested_by);
  params.emplace_back(std::to_string(kMaxReplayBatch));
  // Marks the markable rows and counts the rest (see request_replay.sql).
  auto r = (*conn)->exec(sql::dead_letters::request_replay, params);
  if (!r) return fail(explained(**conn, r.error()));
  return ReplayRequest{.requested = static_cast<size_t>(r->get_int(0, "requested")),
                       .already_requested = static_cast<size_t>(r->get_int(0, "pending")),
                       .already_replayed = static_cast<size_t>(r->get_int(0, "replayed"))};
}

Result<size_t> DeadLetterStore::purge(const DeadLetterFilter& filter) {
  if (auto ok = refuse_empty(filter, "purge"); !ok) return fail(ok.error());
  if (auto ok = check(filter); !ok) return fail(ok.error());
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto r = (*conn)->exec(sql::dead_letters::purge, filter_params(filter));
  if (!r) return fail(explained(**conn, r.error()));
  return static_cast<size_t>(std::stoll(r->get(0, 0)));
}

Result<std::vector<StoredDeadLetter>> DeadLetterStore::claim(const std::string& binding,
                                                             size_t limit) {
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto r = (*conn)->exec(sql::dead_letters::claim,
                         {binding, std::to_string(std::max<size_t>(limit, 1))});
  if (!r) return fail(r.error());
  return rows_of(*r);
}

Result<bool> DeadLetterStore::record(const std::string& id, ReplayOutcome outcome,
                                     const std::string& detail,
                                     const std::optional<std::string>& execution_id) {
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto r = (*conn)->exec(
      sql::dead_letters::record,
      {id, std::string(to_string(outcome)),
       detail.empty() ? store::Param{} : store::Param{to_valid_utf8(detail)}, execution_id});
  if (!r) return fail(r.error());
  return r->affected() > 0;
}

}  // namespace harvest::connector_dlq
