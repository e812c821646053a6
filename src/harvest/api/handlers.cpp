#include <fmt/chrono.h>
#include <fmt/format.h>

#include <charconv>
#include <span>

#include <harvest/api/console_history.hpp>
#include <harvest/api/handlers.hpp>
#include <harvest/api/http_status.hpp>
#include <harvest/api/overview_cache.hpp>
#include <harvest/api/routes.hpp>

namespace harvest::api {

namespace {

constexpr size_t kMaxExecutionPage = 500;

// Now as RFC 3339 UTC with milliseconds.
std::string iso_now() {
  return fmt::format(
      "{:%Y-%m-%dT%H:%M:%S}Z",
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
}
constexpr size_t kMaxDeadLetterPage = 1000;

// The overview's answer for a window, counted now (OverviewCache keeps it).
Result<std::string> overview_body(engine::Engine& engine, long long seconds) {
  auto o = engine.overview(std::chrono::seconds(seconds));
  if (!o) return fail(o.error());
  Json runs = Json::array();
  for (const auto& c : o->runs) {
    runs.push_back(Json{{"workflow", c.workflow}, {"status", c.status}, {"count", c.count}});
  }
  const double secs = static_cast<double>(o->window.count());
  return dump(Json{{"window_seconds", o->window.count()},
                   {"as_of", iso_now()},
                   {"started", o->started},
                   {"completed", o->completed},
                   {"started_per_second", static_cast<double>(o->started) / secs},
                   {"completed_per_second", static_cast<double>(o->completed) / secs},
                   {"runs", std::move(runs)}});
}

std::string join(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// A request body: a JSON object whose members all belong to the route. An
// unknown member is refused rather than ignored: a misspelt
// `idempotency_key` silently dropped would turn a retry into a second run.
class Body {
 public:
  // An empty body reads as `{}` when the route has no required field.
  [[nodiscard]] static Result<Body> parse(const std::string& text, const JsonLimits& limits,
                                          bool may_be_empty,
                                          std::span<const std::string_view> fields) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      if (may_be_empty) return Body(Json::object());
      return fail(Error::bad_request(
          fmt::format("request body is empty; expected a JSON object with {}", join(fields))));
    }
    auto parsed = parse_json(text, limits);
    if (!parsed) {
      return fail(Error::bad_request(fmt::format("request body: {}", parsed.error().message)));
    }
    Json j = std::move(*parsed);
    if (!j.is_object()) {
      return fail(Error::bad_request(
          fmt::format("request body must be a JSON object, not {}", j.type_name())));
    }
    for (const auto& item : j.items()) {
      bool known = false;
      for (auto f : fields) known = known || item.key() == f;
      if (!known) {
        return fail(Error::bad_request(
            fmt::format("unknown field '{}' in request body; this route accepts {}", item.key(),
                        join(fields))));
      }
    }
    return Body(std::move(j));
  }

  // The member, JSON null included; std::nullopt when absent.
  [[nodiscard]] std::optional<Json> value(const std::string& field) const {
    auto it = json_.find(field);
    if (it == json_.end()) return std::nullopt;
    return *it;
  }

  // A string member; absent or null is std::nullopt, any other type is a bad
  // request naming the field.
  [[nodiscard]] Result<std::optional<std::string>> string(const std::string& field) const {
    auto it = json_.find(field);
    if (it == json_.end() || it->is_null()) return std::optional<std::string>{};
    if (!it->is_string()) {
      return fail(Error::bad_request(
          fmt::format("field '{}' must be a string, not {}", field, it->type_name())));
    }
    return std::optional<std::string>{it->get<std::string>()};
  }

  [[nodiscard]] Result<std::string> required_string(const std::string& field) const {
    auto s = string(field);
    if (!s) return fail(s.error());
    if (!*s) {
      return fail(Error::bad_request(fmt::format("request body needs '{}' (a string)", field)));
    }
    return std::move(**s);
  }

 private:
  explicit Body(Json j) : json_(std::move(j)) {}
  Json json_;
};

// The idempotency key from the body and/or the Idempotency-Key header; both
// may be sent only if they agree. The engine checks the key itself
// (reserved prefix, length, deferred-admission workflows), so a header key
// meets exactly the checks a body key does.
Result<std::optional<std::string>> idempotency_key(const Body& body, const ApiRequest& req) {
  auto from_body = body.string("idempotency_key");
  if (!from_body) return fail(from_body.error());
  if (req.idempotency_key_headers.size() > 1) {
    return fail(Error::bad_request("send at most one Idempotency-Key header"));
  }
  if (req.idempotency_key_headers.empty()) return *from_body;
  const std::string& header = req.idempotency_key_headers.front();
  if (*from_body && **from_body != header) {
    return fail(Error::bad_request(fmt::format(
        "the Idempotency-Key header ('{}') and the body's idempotency_key ('{}') differ; send "
        "the key once, or the same key in both",
        header, **from_body)));
  }
  return std::optional<std::string>{header};
}

Status check_query(const ApiRequest& req, std::span<const std::string_view> allowed) {
  for (const auto& [k, v] : req.query) {
    bool known = false;
    for (auto a : allowed) known = known || k == a;
    if (!known) {
      return fail(Error::bad_request(
          fmt::format("unknown query parameter '{}'; this route accepts {}", k, join(allowed))));
    }
  }
  return {};
}

std::optional<std::string> query(const ApiRequest& req, std::string_view name) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return std::nullopt;
  return it->second;
}

Result<std::optional<size_t>> limit_param(const ApiRequest& req, size_t max,
                                          const char* name = "limit") {
  auto text = query(req, name);
  if (!text) return std::optional<size_t>{};
  size_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value == 0 || value > max) {
    return fail(Error::bad_request(fmt::format(
        "query parameter '{}' must be an integer from 1 to {}, not '{}'", name, max, *text)));
  }
  return std::optional<size_t>{value};
}

// The connector dead-letter filter from a request body; values are checked
// by the store (connector_dlq::check) before any SQL runs.
Result<connector_dlq::DeadLetterFilter> body_filter(const Body& body) {
  connector_dlq::DeadLetterFilter f;
  for (auto [field, slot] : {std::pair{"id", &f.id}, std::pair{"binding", &f.binding},
                             std::pair{"stream", &f.stream}, std::pair{"reason", &f.reason},
                             std::pair{"since", &f.since}, std::pair{"until", &f.until}}) {
    auto v = body.string(field);
    if (!v) return fail(v.error());
    *slot = std::move(*v);
  }
  return f;
}

ApiResponse respond(Result<ApiResponse> r) {
  return r ? std::move(*r) : error_response(r.error());
}

}  // namespace

ApiResponse json_response(int status, const Json& body) {
  return ApiResponse{.status = status, .body = dump(body)};
}

ApiResponse error_response(int status, std::string_view kind, std::string message) {
  auto r = json_response(status, Json{{"error", kind}, {"message", std::move(message)}});
  // A transient failure may succeed shortly; tell clients when to retry.
  if (status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

ApiResponse error_response(const Error& error) {
  const int status = http_status(error.kind);
  if (status < 500) return error_response(status, to_string(error.kind), error.message);
  // The cause of a server-side failure may quote the database (SQL text,
  // SQLSTATEs, relation names): it is logged, never answered.
  auto r = error_response(status, to_string(error.kind),
                          status == 503 ? "the service is temporarily unavailable; retry later"
                                        : "internal error; the server log has the cause under "
                                          "this request id");
  r.log_detail = error.describe();
  return r;
}

Handlers::Handlers(engine::Engine& engine, std::string prefix,
                   std::shared_ptr<metrics::PrometheusMetrics> exporter, JsonLimits json)
    : engine_(engine),
      connector_dead_letters_(engine.pool()),
      prefix_(std::move(prefix)),
      exporter_(std::move(exporter)),
      json_(json),
      overview_cache_(std::make_unique<OverviewCache>(
          [&engine](long long window) { return overview_body(engine, window); },
          std::chrono::seconds(2))),
      history_(std::make_unique<ConsoleHistory>(engine, nullptr, std::chrono::seconds(15))) {}

Handlers::~Handlers() = default;

ApiResponse Handlers::start(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, false, body_fields::kStart);
    if (!body) return fail(body.error());
    auto workflow_id = body->string("workflow_id");
    if (!workflow_id) return fail(workflow_id.error());
    auto input = body->value("input");
    if (!input) {
      return fail(Error::bad_request(
          "request body needs 'input', the workflow's input (send {} for a workflow without one)"));
    }
    auto key = idempotency_key(*body, req);
    if (!key) return fail(key.error());
    auto r = engine_.start(engine::StartRequest{.workflow = req.params.at(0),
                                                .workflow_id = std::move(*workflow_id),
                                                .input = std::move(*input),
                                                .idempotency_key = std::move(*key),
                                                .source = engine::StartSource::kApi});
    if (!r) return fail(r.error());
    const std::string id = r->execution_id.value_or("");
    switch (r->kind) {
      case engine::StartOutcomeKind::kStarted: {
        auto resp = json_response(201, Json{{"execution_id", id}, {"outcome", "started"}});
        resp.headers.emplace_back("Location", prefix_ + "/executions/" + id);
        return resp;
      }
      case engine::StartOutcomeKind::kIdempotentReplay:
        return json_response(200, Json{{"execution_id", id}, {"outcome", "idempotent_replay"}});
      case engine::StartOutcomeKind::kDeferred:
        return json_response(202, Json{{"outcome", "deferred"}});
    }
    return fail(Error::internal("unknown start outcome"));
  }());
}

ApiResponse Handlers::signal_with_start(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, false, body_fields::kSignalWithStart);
    if (!body) return fail(body.error());
    auto workflow_id = body->required_string("workflow_id");
    if (!workflow_id) return fail(workflow_id.error());
    auto signal = body->required_string("signal");
    if (!signal) return fail(signal.error());
    auto key = idempotency_key(*body, req);
    if (!key) return fail(key.error());
    engine::SignalWithStartRequest sws{.workflow = req.params.at(0),
                                       .workflow_id = std::move(*workflow_id),
                                       .signal = std::move(*signal),
                                       .idempotency_key = std::move(*key),
                                       .source = engine::StartSource::kApi};
    if (auto input = body->value("input")) sws.start_input = std::move(*input);
    if (auto payload = body->value("payload")) sws.payload = std::move(*payload);
    auto reuse = body->string("workflow_id_reuse");
    if (!reuse) return fail(reuse.error());
    if (*reuse && **reuse == "reject") {
      sws.reuse = engine::WorkflowIdReuse::kReject;
    } else if (*reuse && **reuse != "allow_after_close") {
      return fail(Error::bad_request(
          "field 'workflow_id_reuse' must be \"allow_after_close\" (the default) or \"reject\""));
    }
    auto r = engine_.signal_with_start(sws);
    if (!r) return fail(r.error());
    return json_response(r->started ? 201 : 200, Json{{"execution_id", r->execution_id},
                                                      {"started", r->started},
                                                      {"duplicate_signal", r->duplicate_signal},
                                                      {"run", r->run_no}});
  }());
}

ApiResponse Handlers::signal_execution(const ApiRequest& req) {
  return signal(req, engine::SignalTarget{.execution_id = req.params.at(0)}, req.params.at(1));
}

ApiResponse Handlers::signal_workflow(const ApiRequest& req) {
  return signal(req,
                engine::SignalTarget{.workflow = req.params.at(0), .workflow_id = req.params.at(1)},
                req.params.at(2));
}

ApiResponse Handlers::signal(const ApiRequest& req, engine::SignalTarget target,
                             const std::string& name) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, true, body_fields::kSignal);
    if (!body) return fail(body.error());
    auto key = idempotency_key(*body, req);
    if (!key) return fail(key.error());
    engine::SignalRequest sig{
        .target = std::move(target), .name = name, .idempotency_key = std::move(*key)};
    if (auto payload = body->value("payload")) sig.payload = std::move(*payload);
    auto r = engine_.signal(sig);
    if (!r) return fail(r.error());
    return json_response(
        200, Json{{"execution_id", r->execution_id},
                  {"outcome",
                   r->kind == engine::SignalOutcomeKind::kDelivered ? "delivered" : "duplicate"}});
  }());
}

ApiResponse Handlers::cancel_execution(const ApiRequest& req) {
  return stop(req, false);
}

ApiResponse Handlers::terminate_execution(const ApiRequest& req) {
  return stop(req, true);
}

ApiResponse Handlers::cancel_executions(const ApiRequest& req) {
  return stop_where(req, false);
}

ApiResponse Handlers::terminate_executions(const ApiRequest& req) {
  return stop_where(req, true);
}

ApiResponse Handlers::stop(const ApiRequest& req, bool terminate) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, false, body_fields::kStop);
    if (!body) return fail(body.error());
    auto reason = body->required_string("reason");
    if (!reason) return fail(reason.error());
    auto by = body->string("requested_by");
    if (!by) return fail(by.error());
    engine::StopRequest stop{.execution_id = req.params.at(0),
                             .reason = std::move(*reason),
                             .requested_by = by->value_or("api")};
    auto r = terminate ? engine_.terminate(stop) : engine_.cancel(stop);
    if (!r) return fail(r.error());
    // A new cancel request is accepted, not done: the run ends when it sees
    // it at its next durable operation.
    const int status = r->kind == engine::StopOutcomeKind::kRequested ? 202 : 200;
    return json_response(status, Json{{"execution_id", r->execution_id},
                                      {"outcome", engine::to_string(r->kind)},
                                      {"status", r->status}});
  }());
}

ApiResponse Handlers::stop_where(const ApiRequest& req, bool terminate) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, false, body_fields::kBulkStop);
    if (!body) return fail(body.error());
    auto workflow = body->required_string("workflow");
    if (!workflow) return fail(workflow.error());
    auto status = body->string("status");
    if (!status) return fail(status.error());
    auto reason = body->required_string("reason");
    if (!reason) return fail(reason.error());
    auto by = body->string("requested_by");
    if (!by) return fail(by.error());
    bool dry_run = false;
    if (auto d = body->value("dry_run"); d && !d->is_null()) {
      if (!d->is_boolean()) {
        return fail(Error::bad_request(
            fmt::format("field 'dry_run' must be a boolean, not {}", d->type_name())));
      }
      dry_run = d->get<bool>();
    }
    engine::StopFilter filter{.workflow = std::move(*workflow), .status = std::move(*status)};
    const std::string who = by->value_or("api");
    auto r = terminate ? engine_.terminate_where(filter, *reason, who, dry_run)
                       : engine_.cancel_where(filter, *reason, who, dry_run);
    if (!r) return fail(r.error());
    return json_response(200, Json{{"matched", r->matched},
                                   {terminate ? "terminated" : "cancel_requested", r->stopped},
                                   {"dry_run", r->dry_run}});
  }());
}

ApiResponse Handlers::get_execution(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, {}); !ok) return fail(ok.error());
    auto view = engine_.get_execution(req.params.at(0));
    if (!view) return fail(view.error());
    return json_response(200, to_json(*view, trace_url_template_));
  }());
}

void Handlers::set_console_sources(std::function<std::vector<BindingOverview>()> bindings,
                                   std::string trace_url_template,
                                   std::chrono::milliseconds lag_every) {
  bindings_ = std::move(bindings);
  trace_url_template_ = std::move(trace_url_template);
  history_.reset();
  history_ = std::make_unique<ConsoleHistory>(engine_, bindings_, lag_every);
}

ApiResponse Handlers::overview(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, query_params::kOverview); !ok) return fail(ok.error());
    auto window = limit_param(req, 3600, "window_seconds");
    if (!window) return fail(window.error());
    auto body = overview_cache_->get(static_cast<long long>(window->value_or(60)));
    if (!body) return fail(body.error());
    return ApiResponse{.status = 200, .body = std::move(*body)};
  }());
}

ApiResponse Handlers::overview_history(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, {}); !ok) return fail(ok.error());
    auto body = history_->body();
    if (!body) return fail(body.error());
    return ApiResponse{.status = 200, .body = std::move(*body)};
  }());
}

ApiResponse Handlers::connectors(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, {}); !ok) return fail(ok.error());
    Json items = Json::array();
    if (bindings_) {
      for (const auto& b : bindings_()) items.push_back(to_json(b));
    }
    return json_response(200, Json{{"items", std::move(items)}});
  }());
}

ApiResponse Handlers::list_executions(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, query_params::kListExecutions); !ok) return fail(ok.error());
    auto limit = limit_param(req, kMaxExecutionPage);
    if (!limit) return fail(limit.error());
    engine::ExecutionFilter filter{.workflow = query(req, "workflow"),
                                   .status = query(req, "status"),
                                   .start_source = query(req, "start_source"),
                                   .workflow_id = query(req, "workflow_id"),
                                   .workflow_id_prefix = query(req, "workflow_id_prefix"),
                                   .start_source_ref = query(req, "source_ref"),
                                   .since = query(req, "since"),
                                   .until = query(req, "until"),
                                   .cursor = query(req, "cursor")};
    if (*limit) filter.limit = **limit;
    auto page = engine_.list_executions(filter);
    if (!page) return fail(page.error());
    return json_response(200, to_json(*page));
  }());
}

ApiResponse Handlers::list_dead_letters(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, query_params::kListDeadLetters); !ok) return fail(ok.error());
    auto limit = limit_param(req, kMaxDeadLetterPage);
    if (!limit) return fail(limit.error());
    auto dead = engine_.dead_letter_page(limit->value_or(100), query(req, "cursor"));
    if (!dead) return fail(dead.error());
    Json items = Json::array();
    for (const auto& d : dead->items) items.push_back(to_json(d));
    return json_response(
        200, Json{{"items", std::move(items)},
                  {"next_cursor", dead->next_cursor ? Json(*dead->next_cursor) : Json(nullptr)}});
  }());
}

ApiResponse Handlers::replay_dead_letter(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    const std::string& id = req.params.at(0);
    if (auto r = engine_.replay_dead_letter(id); !r) return fail(r.error());
    return json_response(200, Json{{"execution_id", id}, {"outcome", "replayed"}});
  }());
}

ApiResponse Handlers::list_connector_dead_letters(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, query_params::kListConnectorDeadLetters); !ok) {
      return fail(ok.error());
    }
    auto limit = limit_param(req, connector_dlq::kMaxListLimit);
    if (!limit) return fail(limit.error());
    connector_dlq::DeadLetterFilter f{.binding = query(req, "binding"),
                                      .stream = query(req, "stream"),
                                      .reason = query(req, "reason"),
                                      .since = query(req, "since"),
                                      .until = query(req, "until")};
    auto rows = connector_dead_letters_.list_page(
        f, limit->value_or(connector_dlq::kDefaultListLimit), query(req, "cursor"));
    if (!rows) return fail(rows.error());
    Json items = Json::array();
    for (const auto& d : rows->items) items.push_back(to_json(d));
    return json_response(
        200, Json{{"items", std::move(items)},
                  {"next_cursor", rows->next_cursor ? Json(*rows->next_cursor) : Json(nullptr)}});
  }());
}

ApiResponse Handlers::get_connector_dead_letter(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    if (auto ok = check_query(req, {}); !ok) return fail(ok.error());
    auto row = connector_dead_letters_.show(req.params.at(0));
    if (!row) return fail(row.error());
    return json_response(200, to_json_detail(*row));
  }());
}

ApiResponse Handlers::replay_connector_dead_letters(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, false, body_fields::kConnectorDeadLetterReplay);
    if (!body) return fail(body.error());
    auto by = body->required_string("requested_by");
    if (!by) return fail(by.error());
    auto filter = body_filter(*body);
    if (!filter) return fail(filter.error());
    auto marked = connector_dead_letters_.request_replay(*filter, *by);
    if (!marked) return fail(marked.error());
    return json_response(200, to_json(*marked));
  }());
}

ApiResponse Handlers::purge_connector_dead_letters(const ApiRequest& req) {
  return respond([&]() -> Result<ApiResponse> {
    auto body = Body::parse(req.body, json_, true, body_fields::kConnectorDeadLetterPurge);
    if (!body) return fail(body.error());
    auto filter = body_filter(*body);
    if (!filter) return fail(filter.error());
    auto purged = connector_dead_letters_.purge(*filter);
    if (!purged) return fail(purged.error());
    return json_response(200, Json{{"purged", *purged}});
  }());
}

ApiResponse Handlers::health(const ApiRequest&) {
  auto shards = engine_.shard_status();
  Json list = Json::array();
  std::optional<std::string> problem;
  std::string causes;
  for (auto s : shards) {
    if (!s.readable) {
      if (!problem) problem = fmt::format("shard {} ({}) is not readable", s.index, s.location);
      causes += fmt::format("shard {}: {}; ", s.index, s.error.value_or("no answer"));
    }
    s.error.reset();  // the database's own words stay in the log
    list.push_back(to_json(s));
  }
  if (shards.empty()) problem = "the engine reports no shard";
  if (problem) {
    auto r = error_response(503, to_string(ErrorKind::kTransient), *problem);
    r.body = dump(Json{{"error", to_string(ErrorKind::kTransient)},
                       {"message", *problem},
                       {"shards", std::move(list)}});
    r.log_detail = causes.empty() ? *problem : causes;
    return r;
  }
  // A binding holding on a coordinate collision needs an operator, but the
  // process is serving: 200, status "degraded", and which binding and why.
  Json holding = Json::array();
  if (bindings_) {
    for (const auto& b : bindings_()) {
      if (b.collision_hold) {
        holding.push_back(Json{{"binding", b.binding}, {"collision_hold", *b.collision_hold}});
      }
    }
  }
  Json body{{"status", holding.empty() ? "ok" : "degraded"}, {"shards", std::move(list)}};
  if (!holding.empty()) body["bindings_holding"] = std::move(holding);
  return json_response(200, std::move(body));
}

ApiResponse Handlers::metrics(const ApiRequest&) {
  if (!exporter_) {
    return error_response(
        404, "not_found",
        "no Prometheus exporter is configured: open the engine with EngineConfig::metrics set to "
        "a metrics::PrometheusMetrics, or pass one in ApiConfig::metrics");
  }
  return ApiResponse{.status = 200,
                     .body = exporter_->render(),
                     .content_type = std::string(metrics::PrometheusMetrics::kContentType)};
}

}  // namespace harvest::api
