#include <algorithm>
#include <cstdint>

#include <harvest/api/views.hpp>
#include <harvest/common/ids.hpp>

namespace harvest::api {

namespace {

template <typename T>
Json opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) {
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) {
      out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 0x3f] : '=';
    }
  }
  return out;
}

// A trace id is 32 hex digits (TraceContext checks it), so the link built
// from the operator's template carries nothing a producer chose.
Json trace_url(const engine::ExecutionView& view, std::string_view url_template) {
  constexpr std::string_view kMark = "{trace_id}";
  const auto at = url_template.find(kMark);
  if (!view.start_trace || at == std::string_view::npos) return nullptr;
  std::string url(url_template);
  url.replace(at, kMark.size(), view.start_trace->trace_id());
  return url;
}

}  // namespace

Json to_json(const engine::HistoryEvent& event) {
  return Json{{"id", event.id},           {"op_seq", opt(event.op_seq)},
              {"kind", event.kind},       {"name", opt(event.name)},
              {"payload", event.payload}, {"recorded_at", opt(event.recorded_at)}};
}

Json to_json(const engine::ExecutionView& view, std::string_view trace_url_template) {
  Json history = Json::array();
  for (const auto& e : view.history) history.push_back(to_json(e));
  Json unread = Json::array();
  for (const auto& u : view.unread_signals) {
    unread.push_back(Json{
        {"id", u.id}, {"name", u.name}, {"payload", u.payload}, {"received_at", u.received_at}});
  }
  return Json{{"execution_id", view.id},
              {"workflow", view.workflow_name},
              {"workflow_id", opt(view.workflow_id)},
              {"run", view.run_no},
              {"current_run", view.current},
              {"status", view.status},
              {"input", view.input},
              {"output", view.output},
              {"error", opt(view.error)},
              {"start_source", view.start_source},
              {"start_source_ref", opt(view.start_source_ref)},
              {"start_trace", view.start_trace ? to_json(*view.start_trace) : Json(nullptr)},
              {"trace_url", trace_url(view, trace_url_template)},
              {"attempt", view.attempt},
              {"lease_owner", opt(view.lease_owner)},
              {"lease_expires_at", opt(view.lease_expires_at)},
              {"created_at", view.created_at},
              {"completed_at", opt(view.completed_at)},
              {"runs", view.runs},
              {"previous_run", opt(view.previous_run)},
              {"next_run", opt(view.next_run)},
              {"unread_signals", std::move(unread)},
              {"history", std::move(history)}};
}

Json to_json(const engine::ExecutionSummary& s) {
  return Json{{"execution_id", s.id},
              {"workflow", s.workflow_name},
              {"workflow_id", opt(s.workflow_id)},
              {"status", s.status},
              {"start_source", s.start_source},
              {"start_source_ref", opt(s.start_source_ref)},
              {"attempt", s.attempt},
              {"created_at", s.created_at},
              {"completed_at", opt(s.completed_at)},
              {"shard", s.shard}};
}

Json to_json(const engine::ExecutionPage& page) {
  Json items = Json::array();
  for (const auto& s : page.items) items.push_back(to_json(s));
  return Json{{"items", std::move(items)}, {"next_cursor", opt(page.next_cursor)}};
}

Json to_json(const engine::EngineDeadLetter& d) {
  return Json{{"execution_id", d.execution_id},
              {"workflow", d.workflow_name},
              {"workflow_id", opt(d.workflow_id)},
              {"reason", d.reason},
              {"error", d.error},
              {"attempts", d.attempts},
              {"failed_at", d.failed_at},
              {"shard", d.shard}};
}

Json to_json(const engine::ShardStatus& s) {
  return Json{{"index", s.index},
              {"location", s.location},
              {"readable", s.readable},
              {"error", opt(s.error)}};
}

Json to_json(const BindingOverview& b) {
  return Json{{"binding", b.binding},
              {"kind", b.kind},
              {"stream", b.stream},
              {"workflow", b.workflow},
              {"subscription", b.subscription},
              {"running", b.running},
              {"lag", opt(b.lag)},
              {"in_flight", b.in_flight},
              {"last_pass_at", opt(b.last_pass_at)},
              {"stalls", b.stalls},
              {"rebuilds", b.rebuilds},
              {"store_available", b.store_available},
              {"dispatched", b.dispatched},
              {"dead_lettered", b.dead_lettered},
              {"retried", b.retried},
              {"collisions", b.collisions},
              {"collision_hold", opt(b.collision_hold)}};
}

Json to_json(const connector_dlq::StoredDeadLetter& d) {
  return Json{{"id", d.id},
              {"binding", d.binding},
              {"stream", d.stream},
              {"coordinates", d.coordinates},
              {"idempotency_key", d.idempotency_key},
              {"reason", d.reason},
              {"detail", d.detail},
              {"attempts", d.attempts},
              {"failed_at", d.failed_at},
              {"payload_bytes", d.payload.size()},
              {"replay_requested_at", opt(d.replay_requested_at)},
              {"replay_requested_by", opt(d.replay_requested_by)},
              {"replayed_at", opt(d.replayed_at)},
              {"replay_outcome", opt(d.replay_outcome)},
              {"replay_detail", opt(d.replay_detail)},
              {"replay_execution_id", opt(d.replay_execution_id)}};
}

Json to_json_detail(const connector_dlq::StoredDeadLetter& d) {
  // Bytes from a broker: as text when they are UTF-8, and always exactly.
  auto text = [](const std::string& bytes) {
    return is_valid_utf8(bytes) ? Json(bytes) : Json(nullptr);
  };
  Json j = to_json(d);
  j["payload"] = text(d.payload);
  j["payload_base64"] = base64(d.payload);
  j["key"] = d.key ? text(*d.key) : Json(nullptr);
  j["key_base64"] = d.key ? Json(base64(*d.key)) : Json(nullptr);
  Json headers = Json::array();
  for (const auto& [name, value] : d.headers) {
    headers.push_back(
        Json{{"name", name}, {"value", text(value)}, {"value_base64", base64(value)}});
  }
  j["headers"] = std::move(headers);
  return j;
}

Json to_json(const connector_dlq::ReplayRequest& r) {
  return Json{{"requested", r.requested},
              {"already_requested", r.already_requested},
              {"already_replayed", r.already_replayed}};
}

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace harvest::api
