#include <fmt/format.h>

#include <harvest/api/views.hpp>
#include <harvest/cli/cancel_terminate.hpp>
#include <harvest/cli/output.hpp>

namespace harvest::cli {

namespace {

using Json = nlohmann::json;

void add(CLI::App* cmd, CancelTerminateOptions& o) {
  cmd->add_option("id", o.id, "execution id (or select runs with --workflow)");
  cmd->add_option("--workflow", o.workflow, "every open run of this workflow type");
  cmd->add_option("--status", o.status, "with --workflow: only runs in this status")
      ->check(CLI::IsMember({"pending", "running", "waiting"}));
  cmd->add_option("--reason", o.reason, "why (recorded in each run's history)")->required();
  cmd->add_option("--requested-by", o.requested_by, "who asks (default: cli:$USER)");
  cmd->add_flag("--yes", o.yes, "with --workflow: act, instead of only counting the runs");
}

std::optional<std::string> set(const std::string& v) {
  return v.empty() ? std::nullopt : std::optional<std::string>(v);
}

}  // namespace

void add_cancel_terminate_commands(CLI::App& executions, CancelTerminateOptions& o) {
  o.cancel = executions.add_subcommand(
      "cancel",
      "ask a run to cancel: it sees the request at its next durable operation, may compensate, "
      "and ends cancelled");
  add(o.cancel, o);
  o.terminate = executions.add_subcommand(
      "terminate", "end a run now: terminated at once, its worker stops at its next write");
  add(o.terminate, o);
}

int run_cancel_terminate(engine::Engine& engine, const CancelTerminateOptions& o, bool json,
                         std::ostream& out, std::ostream& err) {
  const bool terminate = o.terminate->parsed();
  const std::string verb = terminate ? "terminate" : "cancel";
  const std::string by = o.requested_by.empty() ? default_requester() : o.requested_by;
  if (o.id.empty() == o.workflow.empty()) {
    err << fmt::format("error: {} needs an execution id or --workflow (not both)\n", verb);
    return 2;
  }
  if (!o.id.empty()) {
    if (!o.status.empty() || o.yes) {
      err << "error: --status and --yes go with --workflow, not with an execution id\n";
      return 2;
    }
    engine::StopRequest req{.execution_id = o.id, .reason = o.reason, .requested_by = by};
    auto r = terminate ? engine.terminate(req) : engine.cancel(req);
    if (!r) return fail_with(err, r.error());
    if (json) {
      out << api::dump(Json{{"execution_id", r->execution_id},
                            {"outcome", engine::to_string(r->kind)},
                            {"status", r->status}})
          << "\n";
    } else {
      switch (r->kind) {
        case engine::StopOutcomeKind::kRequested:
          out << "cancel requested for " << r->execution_id
              << "; it ends cancelled at its next durable operation\n";
          break;
        case engine::StopOutcomeKind::kAlreadyRequested:
          out << "cancel already requested for " << r->execution_id << " (" << r->status << ")\n";
          break;
        case engine::StopOutcomeKind::kTerminated:
          out << "terminated " << r->execution_id << "\n";
          break;
        case engine::StopOutcomeKind::kAlreadyTerminated:
          out << r->execution_id << " was already terminated\n";
          break;
      }
    }
    return 0;
  }
  engine::StopFilter filter{.workflow = o.workflow, .status = set(o.status)};
  auto r = terminate ? engine.terminate_where(filter, o.reason, by, !o.yes)
                     : engine.cancel_where(filter, o.reason, by, !o.yes);
  if (!r) return fail_with(err, r.error());
  if (json) {
    out << api::dump(Json{{"matched", r->matched},
                          {terminate ? "terminated" : "cancel_requested", r->stopped},
                          {"dry_run", r->dry_run}})
        << "\n";
  } else if (r->dry_run) {
    out << fmt::format("{} open run(s) of {}{} match; run again with --yes to {} them\n",
                       r->matched, o.workflow, o.status.empty() ? "" : " (" + o.status + ")", verb);
  } else {
    out << fmt::format("{} {} of {} open run(s) of {}\n",
                       terminate ? "terminated" : "cancel requested for", r->stopped, r->matched,
                       o.workflow);
  }
  return 0;
}

}  // namespace harvest::cli
