#include "api/views.hpp"

namespace harvest::api {

namespace {

template <typename T>
Json opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Json to_json(const engine::HistoryEvent& event) {
  return Json{{"id", event.id},
              {"op_seq", opt(event.op_seq)},
              {"kind", event.kind},
              {"name", opt(event.name)},
              {"payload", event.payload}};
}

Json to_json(const engine::ExecutionView& view) {
  Json history = Json::array();
  for (const auto& e : view.history) history.push_back(to_json(e));
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
              {"attempt", view.attempt},
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

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace harvest::api
