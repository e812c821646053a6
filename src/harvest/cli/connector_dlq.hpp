// `harvest connector-dead-letters list|show|replay|purge` (alias
// `connector-dlq`): the connector dead letters (dead-lettered broker messages)
// from the command line, reading like `harvest dead-letters` and printing with
// `--json` the shapes the HTTP API answers.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>
#include <string>

#include <harvest/engine/engine.hpp>

namespace harvest::cli {

// What the connector-dead-letters subcommands were given, bound by CLI11.
struct ConnectorDlqOptions {
  std::string id, binding, stream, reason, since, until, requested_by;
  size_t limit = 100;
  CLI::App* list = nullptr;
  CLI::App* show = nullptr;
  CLI::App* replay = nullptr;
  CLI::App* purge = nullptr;

  [[nodiscard]] bool parsed() const {
    return list->parsed() || show->parsed() || replay->parsed() || purge->parsed();
  }
};

// Adds `connector-dead-letters` (alias `connector-dlq`) and its subcommands to
// `app`, binding into `o` (kept).
void add_connector_dlq_commands(CLI::App& app, ConnectorDlqOptions& o);

// Runs the parsed subcommand over the engine's first shard (which holds the
// connector's tables). Exit codes: 0 done, 1 failed, 2 a usage error (a
// purge or replay without a filter).
[[nodiscard]] int run_connector_dlq(engine::Engine& engine, const ConnectorDlqOptions& o, bool json,
                                    std::ostream& out, std::ostream& err);

}  // namespace harvest::cli
