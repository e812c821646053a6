// JSON renderings of the engine's read models, shared by the HTTP API and the
// CLI's `--json` output so both speak the same shapes.
//
// An execution's own id is always `execution_id`, its workflow type
// `workflow`; absent optional values render as null.
#pragma once

#include <string>
#include <string_view>

#include <harvest/api/http_server.hpp>
#include <harvest/connector_dlq/dead_letter_store.hpp>
#include <harvest/engine/types.hpp>

namespace harvest::api {

using Json = nlohmann::json;

[[nodiscard]] Json to_json(const engine::HistoryEvent& event);
// Status, input, output/error, provenance, attempt and the full history.
// `trace_url` is the run's trace id put into `trace_url_template`
// (ApiConfig::trace_url_template), or null.
[[nodiscard]] Json to_json(const engine::ExecutionView& view,
                           std::string_view trace_url_template = {});
[[nodiscard]] Json to_json(const engine::ExecutionSummary& summary);
// {"items": [...], "next_cursor": string|null}
[[nodiscard]] Json to_json(const engine::ExecutionPage& page);
[[nodiscard]] Json to_json(const engine::EngineDeadLetter& dead_letter);
[[nodiscard]] Json to_json(const engine::ShardStatus& shard);
[[nodiscard]] Json to_json(const BindingOverview& binding);
// A connector dead letter as listed: the row and its replay bookkeeping,
// the payload's size but not its bytes.
[[nodiscard]] Json to_json(const connector_dlq::StoredDeadLetter& dead_letter);
// As listed, plus the payload: `payload` as text when it is valid UTF-8
// (else null) and `payload_base64` always; the record key the same way
// (`key`, `key_base64`, both null without one); and `headers`, each
// {name, value (text or null), value_base64}.
[[nodiscard]] Json to_json_detail(const connector_dlq::StoredDeadLetter& dead_letter);
// {"requested": n, "already_requested": n, "already_replayed": n}
[[nodiscard]] Json to_json(const connector_dlq::ReplayRequest& request);

// Serialises `j` compactly; invalid UTF-8 in strings (which may come from a
// request path or a workflow's error text) is replaced rather than thrown on.
[[nodiscard]] std::string dump(const Json& j);

}  // namespace harvest::api
