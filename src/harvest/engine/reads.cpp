// Engine: reading executions across shards (ENG-12 status and listing), the
// engine's dead letters (ENG-14) and the queue depth gauge.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/common/strings.hpp>
#include <harvest/engine/admission.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/work_signal.hpp>

namespace harvest::engine {

namespace {

// Longest filter value accepted: ids, names and coordinates are far shorter.
constexpr size_t kMaxFilterText = 1024;

// A page cursor, "<microseconds since the epoch>|<uuid>", as its two parts
// (both empty without a cursor); a malformed one is a bad request.
using CursorParts = std::pair<std::optional<std::string>, std::optional<std::string>>;
Result<CursorParts> parse_cursor(const std::optional<std::string>& cursor) {
  if (!cursor) return CursorParts{};
  auto bar = cursor->find('|');
  if (bar == std::string::npos)
    return fail(
        Error::bad_request("'cursor' is malformed: pass the next_cursor of the previous page"));
  CursorParts out{cursor->substr(0, bar), cursor->substr(bar + 1)};
  if (out.first->empty() || out.first->size() > 18 ||
      out.first->find_first_not_of("0123456789") != std::string::npos || !is_uuid(*out.second)) {
    return fail(
        Error::bad_request("'cursor' is malformed: pass the next_cursor of the previous page"));
  }
  return out;
}

}  // namespace

Result<ExecutionView> Engine::get_execution(const std::string& execution_id) {
  auto where = locate(execution_id);
  if (!where) return fail(where.error());
  if (!*where) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  auto conn = pool(**where).acquire();
  if (!conn) return fail(conn.error());
  auto view = ExecutionStore(**conn).get(execution_id);
  if (!view) return fail(view.error());
  if (!*view) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  return std::move(**view);
}

Result<std::optional<std::string>> Engine::find_execution(const std::string& workflow,
                                                          const std::string& workflow_id) {
  auto conn = pool(route(workflow, workflow_id, std::nullopt)).acquire();
  if (!conn) return fail(conn.error());
  return ExecutionStore(**conn).find(workflow, workflow_id);
}

Result<long long> Engine::queue_depth() {
  long long depth = 0;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto n = ExecutionStore(**conn).runnable_count();
    if (!n) return fail(n.error());
    depth += *n;
  }
  config_.metrics->set_gauge(metrics::kEngineQueueDepth, {}, static_cast<double>(depth));
  return depth;
}

Result<ExecutionPage> Engine::list_executions(const ExecutionFilter& filter) {
  const size_t limit = std::clamp<size_t>(filter.limit, 1, 500);
  // Cursor: "<created_at micros>|<id>" of the last item of the previous page.
  auto after = parse_cursor(filter.cursor);
  if (!after) return fail(after.error());
  const auto& [cursor_us, cursor_id] = *after;
  for (const auto& [v, field] : {std::pair{&filter.since, "since"}, {&filter.until, "until"}}) {
    if (*v && !is_timestamp(**v)) {
      return fail(Error::bad_request(
          fmt::format("'{}' must be an RFC 3339 timestamp such as 2026-12-04T06:00:00Z", field)));
    }
  }
  for (const auto& [v, field] : {std::pair{&filter.workflow, "workflow"},
                                 {&filter.status, "status"},
                                 {&filter.start_source, "start_source"},
                                 {&filter.workflow_id, "workflow_id"},
                                 {&filter.workflow_id_prefix, "workflow_id_prefix"},
                                 {&filter.start_source_ref, "start_source_ref"}}) {
    if (*v && (v->value().size() > kMaxFilterText || !is_valid_utf8(**v) ||
               v->value().find('\0') != std::string::npos)) {
      return fail(Error::bad_request(
          fmt::format("'{}' must be at most {} bytes of UTF-8 text", field, kMaxFilterText)));
    }
  }
  if (filter.status && !is_closed_status(*filter.status) && *filter.status != "pending" &&
      *filter.status != "running" && *filter.status != "waiting") {
    return fail(Error::bad_request(
        "'status' must be one of pending, running, waiting, completed, failed, cancelled, "
        "terminated"));
  }
  std::vector<ListedExecution> all;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto rows = ExecutionStore(**conn).list(filter, cursor_us, cursor_id, limit + 1);
    if (!rows) return fail(rows.error());
    for (auto& r : *rows) {
      r.summary.shard = static_cast<int>(shard);
      all.push_back(std::move(r));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.created_us != b.created_us ? a.created_us > b.created_us : a.summary.id > b.summary.id;
  });
  ExecutionPage page;
  for (size_t i = 0; i < all.size() && i < limit; ++i) page.items.push_back(all[i].summary);
  if (all.size() > limit) {
    const auto& last = all[limit - 1];
    page.next_cursor = fmt::format("{}|{}", last.created_us, last.summary.id);
  }
  return page;
}

Result<RunOverview> Engine::overview(std::chrono::seconds window) {
  if (window < std::chrono::seconds(1) || window > std::chrono::hours(1)) {
    return fail(Error::bad_request("the overview window must be 1 s to 1 h"));
  }
  RunOverview out{.runs = {}, .window = window, .started = 0, .completed = 0};
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    if (auto ok = ExecutionStore(**conn).overview(out); !ok) return fail(ok.error());
  }
  // Shards hold disjoint runs of the same workflows: merge their counts.
  std::map<std::pair<std::string, std::string>, long long> merged;
  for (auto& c : out.runs) merged[{c.workflow, c.status}] += c.count;
  out.runs.clear();
  for (auto& [key, n] : merged) {
    out.runs.push_back(RunOverview::Count{.workflow = key.first, .status = key.second, .count = n});
  }
  return out;
}

Result<std::vector<MinuteActivity>> Engine::activity(long long since) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (since > now || since < now - 24 * 3600) {
    return fail(Error::bad_request("the activity's start must be within the last 24 h"));
  }
  std::map<long long, MinuteActivity> merged;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto rows = ExecutionStore(**conn).activity(since);
    if (!rows) return fail(rows.error());
    for (const auto& m : *rows) {
      MinuteActivity& into = merged[m.minute];
      into.minute = m.minute;
      into.started += m.started;
      into.completed += m.completed;
      into.failed += m.failed;
    }
  }
  std::vector<MinuteActivity> out;
  for (auto& [minute, m] : merged) out.push_back(m);
  return out;
}

Result<std::vector<EngineDeadLetter>> Engine::list_dead_letters(size_t limit) {
  auto page = dead_letter_page(std::clamp<size_t>(limit, 1, 1000));
  if (!page) return fail(page.error());
  return std::move(page->items);
}

Result<EngineDeadLetterPage> Engine::dead_letter_page(size_t limit,
                                                      const std::optional<std::string>& cursor) {
  if (limit < 1 || limit > 1000) {
    return fail(Error::bad_request("'limit' must be an integer from 1 to 1000"));
  }
  auto after = parse_cursor(cursor);
  if (!after) return fail(after.error());
  std::vector<std::pair<long long, EngineDeadLetter>> all;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    auto rows = ExecutionStore(**conn).dead_letters(limit + 1, after->first, after->second);
    if (!rows) return fail(rows.error());
    for (auto& [us, d] : *rows) {
      d.shard = static_cast<int>(shard);
      all.emplace_back(us, std::move(d));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.execution_id > b.second.execution_id;
  });
  EngineDeadLetterPage page;
  for (size_t i = 0; i < all.size() && i < limit; ++i) page.items.push_back(all[i].second);
  if (all.size() > limit) {
    page.next_cursor =
        fmt::format("{}|{}", all[limit - 1].first, all[limit - 1].second.execution_id);
  }
  return page;
}

Status Engine::replay_dead_letter(const std::string& execution_id) {
  auto where = locate(execution_id);
  if (!where) return fail(where.error());
  if (!*where) return fail(Error::not_found(fmt::format("no execution {}", execution_id)));
  auto conn = pool(**where).acquire();
  if (!conn) return fail(conn.error());
  auto tx = store::Transaction::begin(**conn);
  if (!tx) return fail(tx.error());
  if (auto r = ExecutionStore(**conn).replay_dead_letter(execution_id); !r) return r;
  if (auto c = tx->commit(); !c) return fail(c.error());
  work_->notify();
  return {};
}

Result<int> Engine::fire_deferred() {
  int created = 0;
  std::optional<Error> first_error;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    // A shard that is down must not hold back deferred starts on the others.
    auto n = fire_deferred_on(shard);
    if (!n) {
      log::warn("firing deferred starts on shard {} failed: {}", shard, n.error().describe());
      if (!first_error) first_error = n.error();
      continue;
    }
    created += *n;
  }
  if (created > 0) work_->notify();
  if (first_error && created == 0) return fail(*first_error);
  return created;
}

Result<int> Engine::fire_deferred_on(size_t shard) {
  return admission::fire_due(pool(shard), workflows_);
}

}  // namespace harvest::engine
