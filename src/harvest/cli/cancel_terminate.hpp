// `harvest executions cancel|terminate`: stop one run by id, or every open
// run of a workflow (optionally of one status) after a count preview and
// `--yes` (ENG-17). `--json` prints the shapes the HTTP API answers.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include <harvest/engine/engine.hpp>

namespace harvest::cli {

struct CancelTerminateOptions {
  std::string id, workflow, status, reason, requested_by;
  bool yes = false;
  CLI::App* cancel = nullptr;
  CLI::App* terminate = nullptr;

  [[nodiscard]] bool parsed() const { return cancel->parsed() || terminate->parsed(); }
};

// Adds `cancel` and `terminate` under `executions`, binding into `o` (kept).
void add_cancel_terminate_commands(CLI::App& executions, CancelTerminateOptions& o);

// Exit codes: 0 done (or previewed), 1 refused or failed, 2 a usage error
// (an id and a filter together, or neither).
[[nodiscard]] int run_cancel_terminate(engine::Engine& engine, const CancelTerminateOptions& o,
                                       bool json, std::ostream& out, std::ostream& err);

}  // namespace harvest::cli
