#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>

#include <harvest/api/views.hpp>
#include <harvest/cli/cancel_terminate.hpp>
#include <harvest/cli/cli.hpp>
#include <harvest/cli/connector_dlq.hpp>
#include <harvest/cli/connectors_status.hpp>
#include <harvest/cli/output.hpp>
#include <harvest/common/strings.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/conninfo.hpp>
#include <harvest/store/migrations.hpp>
#include <harvest/store/pg.hpp>
#include <harvest/version.hpp>

namespace harvest::cli {

namespace {

using Json = nlohmann::json;

std::string resolve_url(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (auto v = env_or("HARVEST_HARVEST_DATABASE_URL"); !v.empty()) return v;
  return env_or("HARVEST_DATABASE_URL");
}

// Where the engine commands look: an explicit URL, the shard list, or (dev
// profile only) the private cluster.
struct Target {
  std::string url;
  std::vector<std::string> shard_urls;
};

Result<std::unique_ptr<engine::Engine>> open_engine(const Target& target) {
  engine::EngineConfig config;
  // The flag (or the env it defaulted from) wins over the engine's own env
  // lookup, which prefers HARVEST_HARVEST_DATABASE_URL.
  config.harvest_database_url =
      target.url.empty() && !target.shard_urls.empty() ? target.shard_urls.front() : target.url;
  config.shard_urls = target.shard_urls;
  config.pool_size = 2;
  // The CLI runs no workflow: the executions and dead-letters commands work
  // for any workflow name, since they read rows, not registrations.
  return engine::Engine::open(std::move(config), engine::WorkflowRegistry{});
}

int migrate(const Target& target, bool dry_run, bool json, std::ostream& out, std::ostream& err) {
  // Every shard carries the full schema.
  std::vector<std::string> urls =
      target.shard_urls.empty() ? std::vector<std::string>{target.url} : target.shard_urls;
  auto sets = plugin::all_migration_sets();
  Json report = Json::array();
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string where = urls.size() > 1 ? fmt::format("  (shard {})", i) : "";
    auto conn = store::Connection::open(urls[i]);
    if (!conn) return fail_with(err, conn.error());
    auto done =
        dry_run ? store::pending_migrations(**conn, sets) : store::apply_migrations(**conn, sets);
    if (!done) return fail_with(err, done.error());
    Json labels = Json::array();
    for (const auto& p : *done) {
      labels.push_back(p.label());
      if (!json) out << (dry_run ? "pending  " : "applied  ") << p.label() << where << "\n";
    }
    if (!json && done->empty()) out << "up to date" << where << "\n";
    report.push_back(std::move(labels));
  }
  if (json) {
    const char* key = dry_run ? "pending" : "applied";
    if (urls.size() == 1) {
      out << Json{{key, report[0]}}.dump() << "\n";
    } else {
      Json shards = Json::array();
      for (size_t i = 0; i < report.size(); ++i) {
        shards.push_back(Json{{"shard", i}, {key, report[i]}});
      }
      out << Json{{"shards", shards}}.dump() << "\n";
    }
  }
  return 0;
}

int list_executions(engine::Engine& engine, const engine::ExecutionFilter& filter, bool json,
                    std::ostream& out, std::ostream& err) {
  auto page = engine.list_executions(filter);
  if (!page) return fail_with(err, page.error());
  if (json) {
    out << api::dump(api::to_json(*page)) << "\n";
    return 0;
  }
  if (page->items.empty()) {
    out << "no executions\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : page->items) {
    rows.push_back({s.id, s.workflow_name, or_dash(s.workflow_id), s.status, s.start_source,
                    std::to_string(s.attempt), s.created_at, std::to_string(s.shard)});
  }
  print_table(
      out,
      {"EXECUTION", "WORKFLOW", "WORKFLOW_ID", "STATUS", "SOURCE", "ATTEMPT", "CREATED", "SHARD"},
      rows);
  if (page->next_cursor) out << "more: --cursor '" << *page->next_cursor << "'\n";
  return 0;
}

int show_execution(engine::Engine& engine, const std::string& id, bool json, std::ostream& out,
                   std::ostream& err) {
  auto view = engine.get_execution(id);
  if (!view) return fail_with(err, view.error());
  if (json) {
    out << api::dump(api::to_json(*view)) << "\n";
    return 0;
  }
  const auto& v = *view;
  std::vector<std::vector<std::string>> fields = {
      {"execution", v.id},
      {"workflow", v.workflow_name},
      {"workflow_id", or_dash(v.workflow_id)},
      {"run", std::to_string(v.run_no) + (v.current ? "" : " (superseded)")},
      {"status", v.status},
      {"attempt", std::to_string(v.attempt)},
      {"start_source", v.start_source},
      {"start_source_ref", or_dash(v.start_source_ref)},
      {"traceparent", v.start_trace ? v.start_trace->traceparent : "-"},
      {"tracestate", v.start_trace ? v.start_trace->tracestate.value_or("-") : "-"},
      {"input", one_line(api::dump(v.input), 200)},
      {"output", one_line(api::dump(v.output), 200)},
      {"error", one_line(or_dash(v.error), 200)},
  };
  for (const auto& f : fields) out << fmt::format("{:<17}{}\n", f[0] + ":", f[1]);
  out << "\nhistory:\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& h : v.history) {
    rows.push_back({std::to_string(h.id), h.op_seq ? std::to_string(*h.op_seq) : "-", h.kind,
                    or_dash(h.name), one_line(api::dump(h.payload), 80)});
  }
  print_table(out, {"ID", "SEQ", "KIND", "NAME", "PAYLOAD"}, rows);
  return 0;
}

int list_dead_letters(engine::Engine& engine, size_t limit, bool json, std::ostream& out,
                      std::ostream& err) {
  auto dead = engine.list_dead_letters(limit);
  if (!dead) return fail_with(err, dead.error());
  if (json) {
    Json items = Json::array();
    for (const auto& d : *dead) items.push_back(api::to_json(d));
    out << api::dump(Json{{"items", items}}) << "\n";
    return 0;
  }
  if (dead->empty()) {
    out << "no dead letters\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : *dead) {
    rows.push_back({d.execution_id, d.workflow_name, or_dash(d.workflow_id),
                    std::to_string(d.attempts), d.failed_at, std::to_string(d.shard),
                    one_line(d.error, 80)});
  }
  print_table(out, {"EXECUTION", "WORKFLOW", "WORKFLOW_ID", "ATTEMPTS", "FAILED", "SHARD", "ERROR"},
              rows);
  return 0;
}

int replay(engine::Engine& engine, const std::string& id, bool json, std::ostream& out,
           std::ostream& err) {
  if (auto r = engine.replay_dead_letter(id); !r) return fail_with(err, r.error());
  if (json) {
    out << api::dump(Json{{"execution_id", id}, {"outcome", "replayed"}}) << "\n";
  } else {
    out << "replayed " << id << "\n";
  }
  return 0;
}

// Engine::open refuses to open while any shard is unreachable, yet showing
// which shard is down is what `harvest shards` is for: then each URL is
// probed directly.
std::vector<engine::ShardStatus> probe_shards(const Target& target) {
  std::vector<std::string> urls =
      target.shard_urls.empty() ? std::vector<std::string>{target.url} : target.shard_urls;
  std::vector<engine::ShardStatus> out;
  for (size_t i = 0; i < urls.size(); ++i) {
    engine::ShardStatus st{.index = static_cast<int>(i), .location = store::location_of(urls[i])};
    auto conn = store::Connection::open(urls[i]);
    if (!conn) {
      st.error = conn.error().message;
    } else if (auto r = (*conn)->exec("SELECT 1"); !r) {
      st.error = r.error().message;
    } else {
      st.readable = true;
    }
    out.push_back(std::move(st));
  }
  return out;
}

int shards(const Target& target, bool json, std::ostream& out, std::ostream& err) {
  auto engine = open_engine(target);
  auto status = engine ? (*engine)->shard_status() : probe_shards(target);
  size_t readable = 0;
  for (const auto& s : status) readable += s.readable;
  if (json) {
    Json items = Json::array();
    for (const auto& s : status) items.push_back(api::to_json(s));
    out << api::dump(Json{{"shards", items}}) << "\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : status) {
      rows.push_back({std::to_string(s.index), s.location, s.readable ? "yes" : "no",
                      one_line(or_dash(s.error), 100)});
    }
    print_table(out, {"SHARD", "LOCATION", "READABLE", "ERROR"}, rows);
  }
  if (readable == status.size() && !status.empty()) return 0;
  // A shard that cannot be read is an operational failure scripts must see.
  err << fmt::format("error: {} of {} shards not readable\n", status.size() - readable,
                     status.size());
  return 1;
}

}  // namespace

namespace {

// What the command line asked for, bound by CLI11 during parsing.
struct Options {
  std::string url_flag, shard_flag;
  bool json = false;
  bool dry_run = false;
  engine::ExecutionFilter filter;
  std::string workflow, status, source, cursor;
  std::string execution_id;
  size_t dead_letter_limit = 100;
  std::string replay_id;
  CLI::App* migrate_cmd = nullptr;
  CLI::App* list_cmd = nullptr;
  CLI::App* show_cmd = nullptr;
  CLI::App* dead_letters_list = nullptr;
  CLI::App* dead_letters_replay = nullptr;
  CLI::App* shards_cmd = nullptr;
  ConnectorDlqOptions connector_dlq;
  ConnectorsOptions connectors;
  CancelTerminateOptions cancel_terminate;
};

}  // namespace

namespace {

int execute(Options& o, std::ostream& out, std::ostream& err) {
  // Reads running processes over HTTP; needs no database.
  if (o.connectors.parsed()) return run_connectors_status(o.connectors, o.json, out, err);
  Target target{resolve_url(o.url_flag),
                split_list(o.shard_flag.empty() ? env_or("HARVEST_SHARD_URLS") : o.shard_flag)};
  // A HARVEST_PROFILE that does not parse is not dev here; the engine's open
  // refuses it, naming the value.
  const auto profile = engine::parse_profile(env_or("HARVEST_PROFILE"));
  const bool dev = profile && *profile == engine::Profile::kDev;
  if (target.url.empty() && target.shard_urls.empty() && !(dev && !o.migrate_cmd->parsed())) {
    err << "error: no database: pass --database-url or set HARVEST_DATABASE_URL\n";
    return 2;
  }

  if (o.migrate_cmd->parsed()) return migrate(target, o.dry_run, o.json, out, err);
  if (o.shards_cmd->parsed()) return shards(target, o.json, out, err);

  auto engine = open_engine(target);
  if (!engine) return fail_with(err, engine.error());
  engine::Engine& e = **engine;

  if (o.list_cmd->parsed()) {
    if (!o.workflow.empty()) o.filter.workflow = o.workflow;
    if (!o.status.empty()) o.filter.status = o.status;
    if (!o.source.empty()) o.filter.start_source = o.source;
    if (!o.cursor.empty()) o.filter.cursor = o.cursor;
    return list_executions(e, o.filter, o.json, out, err);
  }
  if (o.show_cmd->parsed()) return show_execution(e, o.execution_id, o.json, out, err);
  if (o.cancel_terminate.parsed())
    return run_cancel_terminate(e, o.cancel_terminate, o.json, out, err);
  if (o.dead_letters_list->parsed())
    return list_dead_letters(e, o.dead_letter_limit, o.json, out, err);
  if (o.dead_letters_replay->parsed()) return replay(e, o.replay_id, o.json, out, err);
  if (o.connector_dlq.parsed()) return run_connector_dlq(e, o.connector_dlq, o.json, out, err);
  return 2;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Options o;
  CLI::App app{"harvest: durable workflows on PostgreSQL, started from Kafka and SQS"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("harvest ") + HARVEST_VERSION);
  // Global options may follow the subcommand (`harvest dead-letters list --json`).
  // Subcommands inherit this setting when they are created, so it comes first.
  app.fallthrough();
  app.add_option("--database-url", o.url_flag,
                 "harvest database URL (default: $HARVEST_HARVEST_DATABASE_URL, then "
                 "$HARVEST_DATABASE_URL)");
  app.add_option("--shard-urls", o.shard_flag,
                 "comma-separated shard URLs, replacing the database URL (default: "
                 "$HARVEST_SHARD_URLS)");
  app.add_flag("--json", o.json, "machine-readable output");

  o.migrate_cmd = app.add_subcommand("migrate", "apply pending migrations of every module");
  o.migrate_cmd->add_flag("--dry-run", o.dry_run, "only list pending migrations");

  auto* executions =
      app.add_subcommand("executions", "read, cancel and terminate workflow executions");
  executions->require_subcommand(1);
  o.list_cmd = executions->add_subcommand("list", "list executions, newest first");
  o.list_cmd->add_option("--workflow", o.workflow, "only this workflow type");
  o.list_cmd->add_option("--status", o.status,
                         "only this status (pending, running, waiting, completed, failed, "
                         "cancelled, terminated)");
  o.list_cmd->add_option("--start-source", o.source,
                         "only this start source (api, client, broker…)");
  o.list_cmd->add_option("--limit", o.filter.limit, "page size, 1..500")
      ->default_val(50)
      ->check(CLI::Range(1, 500));
  o.list_cmd->add_option("--cursor", o.cursor, "the next page's cursor from a previous listing");
  o.show_cmd = executions->add_subcommand("show", "one execution with its history");
  o.show_cmd->add_option("id", o.execution_id, "execution id")->required();
  add_cancel_terminate_commands(*executions, o.cancel_terminate);

  // Named like the HTTP routes (/dead-letters, /connector-dead-letters); `dlq`
  // is the name this command had first, kept so existing scripts still work.
  auto* dead_letters = app.add_subcommand(
      "dead-letters",
      "engine dead letters: dead-lettered runs (out of attempts, or crashing their workers)");
  dead_letters->alias("dlq");
  dead_letters->require_subcommand(1);
  o.dead_letters_list =
      dead_letters->add_subcommand("list", "list dead-lettered runs, newest first");
  o.dead_letters_list->add_option("--limit", o.dead_letter_limit, "at most this many, 1..1000")
      ->default_val(100)
      ->check(CLI::Range(1, 1000));
  o.dead_letters_replay = dead_letters->add_subcommand(
      "replay",
      "replay a dead-lettered run: it runs again from its recorded history, with a fresh "
      "attempt budget");
  o.dead_letters_replay->add_option("id", o.replay_id, "execution id")->required();

  add_connector_dlq_commands(app, o.connector_dlq);
  add_connectors_commands(app, o.connectors);

  o.shards_cmd = app.add_subcommand("shards", "probe every PostgreSQL shard");

  // CLI11 lists only a subcommand's own options; name the global ones too, so
  // every command's --help shows --json.
  std::function<void(CLI::App*)> footer = [&](CLI::App* cmd) {
    for (CLI::App* sub : cmd->get_subcommands({})) {
      sub->footer(
          "Global options (before or after the command):\n"
          "  --json                      machine-readable output\n"
          "  --database-url URL          harvest database (default: $HARVEST_DATABASE_URL)\n"
          "  --shard-urls URLS           comma-separated shard URLs (default: "
          "$HARVEST_SHARD_URLS)");
      footer(sub);
    }
  };
  footer(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream o, er;
    int rc = app.exit(e, o, er);
    out << o.str();
    err << er.str();
    return rc == 0 ? 0 : 2;
  }
  return execute(o, out, err);
}

}  // namespace harvest::cli
