// Engine: operators stop runs (ENG-17) — cancel (cooperative: the run sees
// the request at its next durable operation) and terminate (immediate), one
// run by id on whichever shard holds it, or every open run matching a filter
// on every shard. "Stop" in the names below (StopRequest, stop_where) means
// either of the two.
#include <fmt/format.h>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/work_signal.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine {

namespace {

// ENG-20: a terminated run's durable locks pass to the next run in line. On
// failure the next run's periodic re-check finds the lock free.
void release_locks_of_closed(ExecutionStore& store) {
  if (auto r = store.sweep_locks(); !r) {
    log::warn("cannot release the durable locks of ended runs: {}", r.error().describe());
  }
}

Status check_text(std::string_view field, const std::string& value) {
  if (value.empty()) {
    return fail(
        Error::bad_request(fmt::format("{} is required: say why (for the history)", field)));
  }
  if (value.size() > kMaxStopReason) {
    return fail(Error::bad_request(
        fmt::format("{} is {} bytes; the limit is {}", field, value.size(), kMaxStopReason)));
  }
  if (!is_valid_utf8(value) || value.find('\0') != std::string::npos) {
    return fail(
        Error::bad_request(fmt::format("{} must be UTF-8 text without NUL characters", field)));
  }
  return {};
}

Status check_stop(const std::string& reason, const std::string& by) {
  if (auto ok = check_text("reason", reason); !ok) return ok;
  return check_text("requested_by", by);
}

}  // namespace

bool is_closed_status(std::string_view status) {
  return status == "completed" || status == "failed" || status == "cancelled" ||
         status == "terminated";
}

std::string_view to_string(StopOutcomeKind kind) {
  switch (kind) {
    case StopOutcomeKind::kRequested:
      return "cancel_requested";
    case StopOutcomeKind::kAlreadyRequested:
      return "already_requested";
    case StopOutcomeKind::kTerminated:
      return "terminated";
    case StopOutcomeKind::kAlreadyTerminated:
      return "already_terminated";
  }
  return "cancel_requested";
}

Result<StopOutcome> Engine::cancel(const StopRequest& request) {
  return stop(request, false);
}

Result<StopOutcome> Engine::terminate(const StopRequest& request) {
  return stop(request, true);
}

Result<StopOutcome> Engine::stop(const StopRequest& request, bool terminate) {
  if (auto ok = check_stop(request.reason, request.requested_by); !ok) return fail(ok.error());
  const std::string& id = request.execution_id;
  auto where = locate(id);
  if (!where) return fail(where.error());
  if (!*where) return fail(Error::not_found(fmt::format("no execution {}", id)));
  auto conn = pool(**where).acquire();
  if (!conn) return fail(conn.error());
  ExecutionStore store(**conn);
  auto r = terminate ? store.terminate(id, request.reason, request.requested_by)
                     : store.request_cancel(id, request.reason, request.requested_by);
  if (!r) return fail(r.error());
  if (!*r) return fail(Error::not_found(fmt::format("no execution {}", id)));
  const ExecutionStore::StopResult& s = **r;
  const std::string label = workflow_label(s.workflow);
  if (terminate) {
    if (s.changed) {
      release_locks_of_closed(store);
      config_.metrics->increment(metrics::kEngineRunsTerminated, {{"workflow", label}});
      return StopOutcome{StopOutcomeKind::kTerminated, id, "terminated"};
    }
    if (s.status == "terminated")
      return StopOutcome{StopOutcomeKind::kAlreadyTerminated, id, s.status};
    return fail(Error::conflict(
        fmt::format("execution {} is {}; only an open run can be terminated", id, s.status)));
  }
  if (s.changed) {
    work_->notify();  // a pending or waiting run is runnable now
    return StopOutcome{StopOutcomeKind::kRequested, id, s.status};
  }
  if (s.status == "cancelled" || (s.cancel_requested && !is_closed_status(s.status))) {
    return StopOutcome{StopOutcomeKind::kAlreadyRequested, id, s.status};
  }
  return fail(Error::conflict(
      fmt::format("execution {} is {}; only an open run can be cancelled", id, s.status)));
}

Result<BulkStopOutcome> Engine::cancel_where(const StopFilter& filter, const std::string& reason,
                                             const std::string& requested_by, bool dry_run) {
  return stop_where(filter, reason, requested_by, dry_run, false);
}

Result<BulkStopOutcome> Engine::terminate_where(const StopFilter& filter, const std::string& reason,
                                                const std::string& requested_by, bool dry_run) {
  return stop_where(filter, reason, requested_by, dry_run, true);
}

Result<BulkStopOutcome> Engine::stop_where(const StopFilter& filter, const std::string& reason,
                                           const std::string& requested_by, bool dry_run,
                                           bool terminate) {
  if (auto ok = check_stop(reason, requested_by); !ok) return fail(ok.error());
  if (filter.status && *filter.status != "pending" && *filter.status != "running" &&
      *filter.status != "waiting") {
    return fail(Error::bad_request(fmt::format(
        "status '{}' cannot be {}: choose pending, running or waiting (closed runs stay as "
        "they ended)",
        *filter.status, terminate ? "terminated" : "cancelled")));
  }
  if (auto ok =
          check_identifier_if_set("workflow", filter.workflow, IdentifierLimits::kWorkflowName);
      !ok) {
    return fail(ok.error());
  }
  BulkStopOutcome out{.dry_run = dry_run};
  for (size_t shard = 0; shard < shard_count(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) return fail(conn.error());
    ExecutionStore store(**conn);
    auto matched = store.count_open(filter);
    if (!matched) return fail(matched.error());
    out.matched += *matched;
    if (dry_run || *matched == 0) continue;
    auto n = terminate ? store.terminate_where(filter, reason, requested_by)
                       : store.request_cancel_where(filter, reason, requested_by);
    if (!n) return fail(n.error());
    if (terminate) release_locks_of_closed(store);
    for (const auto& [workflow, count] : *n) {
      out.stopped += count;
      if (terminate) {
        config_.metrics->increment(metrics::kEngineRunsTerminated,
                                   {{"workflow", workflow_label(workflow)}},
                                   static_cast<double>(count));
      }
    }
  }
  if (!dry_run && !terminate && out.stopped > 0) work_->notify();
  return out;
}

}  // namespace harvest::engine
