#include <fmt/format.h>

#include <harvest/api/views.hpp>
#include <harvest/cli/connector_dlq.hpp>
#include <harvest/cli/output.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>

namespace harvest::cli {

namespace {

using connector_dlq::DeadLetterFilter;
using connector_dlq::DeadLetterStore;
using connector_dlq::StoredDeadLetter;
using Json = nlohmann::json;

void add_filters(CLI::App* cmd, ConnectorDlqOptions& o) {
  cmd->add_option("--binding", o.binding, "only this connector binding");
  cmd->add_option("--stream", o.stream, "only this stream (topic or queue name)");
  cmd->add_option("--reason", o.reason, "only this reason")
      ->check(CLI::IsMember(
          {"undecodable", "mapping_rejected", "start_rejected", "coordinate_collision"}));
  cmd->add_option("--since", o.since,
                  "failed at or after this instant (RFC 3339, e.g. 2026-12-04T06:00:00Z)");
  cmd->add_option("--until", o.until, "failed before this instant (RFC 3339)");
}

std::optional<std::string> set(const std::string& v) {
  return v.empty() ? std::nullopt : std::optional<std::string>(v);
}

DeadLetterFilter filter_of(const ConnectorDlqOptions& o) {
  return DeadLetterFilter{.id = set(o.id),
                          .binding = set(o.binding),
                          .stream = set(o.stream),
                          .reason = set(o.reason),
                          .since = set(o.since),
                          .until = set(o.until)};
}

// Where a row stands in its replay: "-", "requested", or the outcome.
std::string replay_state(const StoredDeadLetter& d) {
  if (d.replay_outcome) return *d.replay_outcome;
  return d.replay_requested_at ? "requested" : "-";
}

int list(DeadLetterStore& store, const ConnectorDlqOptions& o, bool json, std::ostream& out,
         std::ostream& err) {
  auto rows = store.list(filter_of(o), o.limit);
  if (!rows) return fail_with(err, rows.error());
  if (json) {
    Json items = Json::array();
    for (const auto& d : *rows) items.push_back(api::to_json(d));
    out << api::dump(Json{{"items", items}}) << "\n";
    return 0;
  }
  if (rows->empty()) {
    out << "no connector dead letters\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& d : *rows) {
    table.push_back({d.id, d.binding, d.stream, d.coordinates, d.reason, d.failed_at,
                     replay_state(d), one_line(d.detail, 60)});
  }
  print_table(out,
              {"ID", "BINDING", "STREAM", "COORDINATES", "REASON", "FAILED", "REPLAY", "DETAIL"},
              table);
  return 0;
}

int show(DeadLetterStore& store, const ConnectorDlqOptions& o, bool json, std::ostream& out,
         std::ostream& err) {
  auto row = store.show(o.id);
  if (!row) return fail_with(err, row.error());
  const Json j = api::to_json_detail(*row);
  if (json) {
    out << api::dump(j) << "\n";
    return 0;
  }
  const auto& d = *row;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"id", d.id},
      {"binding", d.binding},
      {"stream", d.stream},
      {"coordinates", d.coordinates},
      {"dedupe_key", d.idempotency_key},
      {"reason", d.reason},
      {"detail", one_line(d.detail, 500)},
      {"attempts", std::to_string(d.attempts)},
      {"failed_at", d.failed_at},
      {"replay_requested", d.replay_requested_at
                               ? *d.replay_requested_at + " by " + or_dash(d.replay_requested_by)
                               : "-"},
      {"replayed_at", or_dash(d.replayed_at)},
      {"replay_outcome", or_dash(d.replay_outcome)},
      {"replay_detail", one_line(or_dash(d.replay_detail), 500)},
      {"replay_execution", or_dash(d.replay_execution_id)},
      {"payload_bytes", std::to_string(d.payload.size())},
  };
  for (const auto& [k, v] : fields) out << fmt::format("{:<18}{}\n", k + ":", v);
  // Text as it arrived when it is UTF-8; otherwise the exact bytes, base64.
  if (j["payload"].is_string()) {
    out << "\npayload:\n" << d.payload << "\n";
  } else {
    out << "\npayload (base64, not UTF-8):\n" << j["payload_base64"].get<std::string>() << "\n";
  }
  return 0;
}

int replay(DeadLetterStore& store, const ConnectorDlqOptions& o, bool json, std::ostream& out,
           std::ostream& err) {
  auto marked = store.request_replay(filter_of(o),
                                     o.requested_by.empty() ? default_requester() : o.requested_by);
  if (!marked) return fail_with(err, marked.error());
  if (json) {
    out << api::dump(api::to_json(*marked)) << "\n";
    return 0;
  }
  out << fmt::format(
      "marked {} for replay ({} already waiting, {} already replayed); each binding's running "
      "connector replays its rows within its replay interval: check with `harvest "
      "connector-dead-letters list`\n",
      marked->requested, marked->already_requested, marked->already_replayed);
  return 0;
}

int purge(DeadLetterStore& store, const ConnectorDlqOptions& o, bool json, std::ostream& out,
          std::ostream& err) {
  auto purged = store.purge(filter_of(o));
  if (!purged) return fail_with(err, purged.error());
  if (json) {
    out << api::dump(Json{{"purged", *purged}}) << "\n";
  } else {
    out << "purged " << *purged << "\n";
  }
  return 0;
}

}  // namespace

void add_connector_dlq_commands(CLI::App& app, ConnectorDlqOptions& o) {
  // Named like its HTTP routes (/connector-dead-letters); `connector-dlq` is
  // the name it had first, kept so existing scripts still work.
  auto* cmd = app.add_subcommand(
      "connector-dead-letters",
      "connector dead letters: dead-lettered broker messages (undecodable, rejected or "
      "colliding)");
  cmd->alias("connector-dlq");
  cmd->require_subcommand(1);
  o.list = cmd->add_subcommand("list", "list dead-lettered broker messages, newest first");
  add_filters(o.list, o);
  o.list->add_option("--limit", o.limit, "at most this many, 1..1000")
      ->default_val(100)
      ->check(CLI::Range(1, 1000));
  o.show = cmd->add_subcommand("show", "show one dead-lettered broker message with its payload");
  o.show->add_option("id", o.id, "dead letter id")->required();
  o.replay = cmd->add_subcommand(
      "replay",
      "replay dead-lettered broker messages: mark them for their binding's running connector to "
      "dispatch again (needs an id or a filter; at most 1000 rows per call; replayed rows are "
      "left alone)");
  o.replay->add_option("id", o.id, "dead letter id");
  add_filters(o.replay, o);
  o.replay->add_option("--by", o.requested_by,
                       "who asks, recorded on each row (default cli:$USER)");
  o.purge = cmd->add_subcommand(
      "purge", "delete dead-lettered broker messages for good (needs an id or a filter)");
  o.purge->add_option("id", o.id, "dead letter id");
  add_filters(o.purge, o);
}

int run_connector_dlq(engine::Engine& engine, const ConnectorDlqOptions& o, bool json,
                      std::ostream& out, std::ostream& err) {
  DeadLetterStore store(engine.pool());
  if ((o.replay->parsed() || o.purge->parsed()) && filter_of(o).empty()) {
    err << fmt::format(
        "error: connector-dead-letters {} needs an explicit filter: an id, or at least one of "
        "--binding, --stream, --reason, --since, --until\n",
        o.replay->parsed() ? "replay" : "purge");
    return 2;
  }
  if (o.list->parsed()) return list(store, o, json, out, err);
  if (o.show->parsed()) return show(store, o, json, out, err);
  if (o.replay->parsed()) return replay(store, o, json, out, err);
  return purge(store, o, json, out, err);
}

}  // namespace harvest::cli
