// ENG-11, ENG-12: every route and status code of the HTTP API, over real HTTP
// on loopback against the test PostgreSQL.
#include <gtest/gtest.h>

#include <set>

#include "api_fixture.hpp"
#include <harvest/store/pool.hpp>

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;

struct Greeting {
  std::string name;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Greeting, name)

engine::WorkflowRegistry workflows() {
  engine::WorkflowRegistry r;
  r.add("greet", [](WorkflowContext& ctx, Greeting g) {
    return ctx.step("compose", [&] { return "Hello, " + g.name + "!"; });
  });
  // Collects two "add" signals, in the order the database recorded them.
  r.add("collector", [](WorkflowContext& ctx, Json) {
    Json got = Json::array();
    for (int i = 0; i < 2; ++i) {
      auto s = ctx.wait_signal("add", 60s);
      if (!s) break;
      got.push_back(*s);
    }
    return got;
  });
  r.add(
      "throttled", [](WorkflowContext&, Json) { return 1; },
      engine::WorkflowOptions{.throttle = engine::ThrottlePolicy{.starts = 1, .period = 1h}});
  r.add(
      "debounced", [](WorkflowContext&, Json) { return 1; },
      engine::WorkflowOptions{.debounce = engine::DebouncePolicy{.window = 1h}});
  r.add(
      "batched", [](WorkflowContext&, Json items) { return items.size(); },
      engine::WorkflowOptions{.batch = engine::BatchPolicy{.max_size = 100, .max_wait = 1h}});
  return r;
}

class HttpApiTest : public testing::ApiTest {
 protected:
  static std::string path(const std::string& rest) { return std::string(kPrefix) + rest; }

  // Starts `workflow` over HTTP and returns the new execution id.
  std::string start(const std::string& workflow, const Json& body) {
    auto r = post(path("/workflows/" + workflow + "/start"), body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 201) << r->body;
    return Json::parse(r->body).value("execution_id", "");
  }

  // Runs runnable executions on this thread until `execution_id` completes.
  void run_to_completion(const std::string& execution_id) {
    engine::Worker w(*engine_);
    EXPECT_TRUE(eventually([&] {
      (void)w.run_one();
      auto v = engine_->get_execution(execution_id);
      return v && v->status == "completed";
    }));
  }

  static void expect_error(const httplib::Result& r, int status, const std::string& kind,
                           const std::string& message_part) {
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    Json j = body(r);
    EXPECT_EQ(j.value("error", ""), kind) << r->body;
    EXPECT_NE(j.value("message", "").find(message_part), std::string::npos)
        << "message should mention '" << message_part << "': " << r->body;
  }
};

TEST_F(HttpApiTest, start_answers_201_then_200_replay_with_the_same_id) {
  serve(workflows());
  auto first = post(path("/workflows/greet/start"),
                    Json{{"input", {{"name", "Ada"}}}, {"idempotency_key", "order-1"}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201) << first->body;
  Json j = body(first);
  EXPECT_EQ(j["outcome"], "started");
  std::string id = j["execution_id"];
  EXPECT_EQ(first->get_header_value("Location"), path("/executions/" + id));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions WHERE id = $1 AND "
                   "start_source = 'api' AND input->>'name' = 'Ada'",
                   {id}),
            1);

  // The same key, from the body and then from the header: the same execution.
  auto again = post(path("/workflows/greet/start"),
                    Json{{"input", {{"name", "Ada"}}}, {"idempotency_key", "order-1"}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(body(again), (Json{{"execution_id", id}, {"outcome", "idempotent_replay"}}));
  auto by_header = post(path("/workflows/greet/start"), Json{{"input", {{"name", "Ada"}}}},
                        {{"Idempotency-Key", "order-1"}});
  ASSERT_TRUE(by_header);
  EXPECT_EQ(by_header->status, 200) << by_header->body;
  EXPECT_EQ(body(by_header)["execution_id"], id);

  // The same key in header and body is fine; different keys are refused.
  auto both = post(path("/workflows/greet/start"),
                   Json{{"input", {{"name", "Ada"}}}, {"idempotency_key", "order-1"}},
                   {{"Idempotency-Key", "order-1"}});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->status, 200);
  expect_error(post(path("/workflows/greet/start"),
                    Json{{"input", {{"name", "Ada"}}}, {"idempotency_key", "order-1"}},
                    {{"Idempotency-Key", "order-2"}}),
               400, "bad_request", "differ");

  // workflow_id dedupe (ENG-6) answers 200 too.
  std::string by_id = start("greet", Json{{"workflow_id", "w-1"}, {"input", {{"name", "Bo"}}}});
  auto dup = post(path("/workflows/greet/start"),
                  Json{{"workflow_id", "w-1"}, {"input", {{"name", "Other"}}}});
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 200);
  EXPECT_EQ(body(dup)["execution_id"], by_id);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 2);
}

TEST_F(HttpApiTest, throttled_start_is_202_without_id_and_a_key_on_it_is_400) {
  serve(workflows());
  start("throttled", Json{{"input", Json::object()}});
  auto deferred = post(path("/workflows/throttled/start"), Json{{"input", Json::object()}});
  ASSERT_TRUE(deferred);
  EXPECT_EQ(deferred->status, 202) << deferred->body;
  EXPECT_EQ(body(deferred), (Json{{"outcome", "deferred"}}));

  expect_error(post(path("/workflows/throttled/start"),
                    Json{{"input", Json::object()}, {"idempotency_key", "k"}}),
               400, "bad_request", "admission");
  expect_error(post(path("/workflows/throttled/start"), Json{{"input", Json::object()}},
                    {{"Idempotency-Key", "k"}}),
               400, "bad_request", "admission");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 0);
}

TEST_F(HttpApiTest, debounced_and_batched_starts_are_202_and_refuse_keys_from_body_or_header) {
  serve(workflows());
  for (std::string wf : {"debounced", "batched"}) {
    const std::string p = path("/workflows/" + wf + "/start");
    auto deferred = post(p, Json{{"workflow_id", "w-1"}, {"input", {{"n", 1}}}});
    ASSERT_TRUE(deferred);
    EXPECT_EQ(deferred->status, 202) << wf << " " << deferred->body;
    EXPECT_EQ(body(deferred), (Json{{"outcome", "deferred"}})) << wf;
    expect_error(post(p, Json{{"input", {{"n", 1}}}, {"idempotency_key", "k"}}), 400, "bad_request",
                 "admission");
    expect_error(post(p, Json{{"input", {{"n", 1}}}}, {{"Idempotency-Key", "k"}}), 400,
                 "bad_request", "admission");
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency"), 0);
}

TEST_F(HttpApiTest, reserved_conn_keys_are_400_in_body_and_header_on_every_route_and_CONN_passes) {
  serve(workflows());
  const std::string start_path = path("/workflows/greet/start");
  const Json input{{"input", {{"name", "Ada"}}}};

  Json body_key = input;
  body_key["idempotency_key"] = "conn:orders:0:41";
  expect_error(post(start_path, body_key), 400, "bad_request", "reserved prefix");
  expect_error(post(start_path, input, {{"Idempotency-Key", "conn:orders:0:41"}}), 400,
               "bad_request", "reserved prefix");
  auto upper = post(start_path, input, {{"Idempotency-Key", "CONN:orders:0:41"}});
  ASSERT_TRUE(upper);
  EXPECT_EQ(upper->status, 201) << upper->body;

  const std::string sws = path("/workflows/collector/signal-with-start");
  const Json sws_body{{"workflow_id", "e-1"}, {"signal", "add"}};
  Json sws_keyed = sws_body;
  sws_keyed["idempotency_key"] = "conn:x";
  expect_error(post(sws, sws_keyed), 400, "bad_request", "reserved prefix");
  expect_error(post(sws, sws_body, {{"Idempotency-Key", "conn:x"}}), 400, "bad_request",
               "reserved prefix");
  auto sws_upper = post(sws, sws_body, {{"Idempotency-Key", "CONN:x"}});
  ASSERT_TRUE(sws_upper);
  EXPECT_EQ(sws_upper->status, 201) << sws_upper->body;
  std::string entity = body(sws_upper)["execution_id"];

  const std::string by_id = path("/executions/" + entity + "/signals/add");
  const std::string by_wf = path("/workflows/collector/executions/e-1/signals/add");
  expect_error(post(by_id, Json{{"idempotency_key", "conn:y"}}), 400, "bad_request",
               "reserved prefix");
  expect_error(post(by_id, "", {{"Idempotency-Key", "conn:y"}}), 400, "bad_request",
               "reserved prefix");
  expect_error(post(by_wf, "", {{"Idempotency-Key", "conn:y"}}), 400, "bad_request",
               "reserved prefix");
  auto sig_upper = post(by_wf, "", {{"Idempotency-Key", "CONN:y"}});
  ASSERT_TRUE(sig_upper);
  EXPECT_EQ(sig_upper->status, 200) << sig_upper->body;

  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE idempotency_key LIKE 'conn:%'"), 0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_start_idempotency WHERE idempotency_key LIKE "
                   "'conn:%'"),
            0);
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE idempotency_key LIKE 'CONN:%'"), 2);
}

TEST_F(HttpApiTest, malformed_or_misshapen_bodies_are_400_naming_the_problem) {
  serve(workflows());
  const std::string p = path("/workflows/greet/start");
  expect_error(post(p, std::string("{\"input\": {\"name\": ")), 400, "bad_request",
               "malformed JSON");
  expect_error(post(p, std::string("{not json}")), 400, "bad_request", "parse error");
  expect_error(post(p, std::string("[1, 2]")), 400, "bad_request",
               "must be a JSON object, not array");
  expect_error(post(p, std::string("")), 400, "bad_request", "empty");
  expect_error(post(p, Json{{"name", "Ada"}}), 400, "bad_request", "unknown field 'name'");
  expect_error(post(p, Json{{"workflow_id", "w"}}), 400, "bad_request", "'input'");
  expect_error(post(p, Json{{"input", {{"name", "Ada"}}}, {"workflow_id", 7}}), 400, "bad_request",
               "'workflow_id' must be a string");
  expect_error(post(p, Json{{"input", {{"name", "Ada"}}}, {"idempotency_key", ""}}), 400,
               "bad_request", "idempotency key");
  expect_error(post(path("/workflows/collector/signal-with-start"), Json{{"signal", "add"}}), 400,
               "bad_request", "'workflow_id'");
  expect_error(post(path("/workflows/collector/signal-with-start"), Json{{"workflow_id", "e"}}),
               400, "bad_request", "'signal'");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
}

TEST_F(HttpApiTest, wrong_type_input_is_422) {
  serve(workflows());
  expect_error(post(path("/workflows/greet/start"), Json{{"input", {{"name", 5}}}}), 422,
               "invalid_input", "greet");
  expect_error(post(path("/workflows/greet/start"), Json{{"input", {{"nom", "Ada"}}}}), 422,
               "invalid_input", "name");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
}

TEST_F(HttpApiTest, unknown_workflow_execution_and_route_are_404_json) {
  serve(workflows());
  expect_error(post(path("/workflows/nope/start"), Json{{"input", Json::object()}}), 404,
               "not_found", "nope");
  expect_error(
      post(path("/workflows/nope/signal-with-start"), Json{{"workflow_id", "e"}, {"signal", "s"}}),
      404, "not_found", "nope");
  expect_error(get(path("/executions/6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00")), 404, "not_found",
               "6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00");
  expect_error(get(path("/executions/not-a-uuid")), 404, "not_found", "not-a-uuid");
  expect_error(post(path("/executions/6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00/signals/s"), ""), 404,
               "not_found", "execution");
  expect_error(post(path("/workflows/collector/executions/ghost/signals/s"), ""), 404, "not_found",
               "execution");
  expect_error(get(path("/nothing/here")), 404, "not_found", "no route for GET");
  // A known path with the wrong method is 405 naming the method.
  expect_error(get(path("/workflows/greet/start")), 405, "method_not_allowed",
               "GET is not allowed");
  expect_error(get("/api/other/executions"), 404, "not_found", "/api/other/executions");
}

TEST_F(HttpApiTest, oversized_body_is_413_and_never_reaches_the_engine) {
  serve(workflows(), {}, api::ApiConfig{.max_body_bytes = 1024});
  std::string big(2000, 'x');
  expect_error(post(path("/workflows/greet/start"), Json{{"input", {{"name", big}}}}), 413,
               "payload_too_large", "1024 bytes");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_workflow_executions"), 0);
  // Under the limit is served as usual.
  start("greet", Json{{"input", {{"name", std::string(900, 'x')}}}});
}

TEST_F(HttpApiTest, signal_to_a_completed_run_is_409) {
  serve(workflows());
  std::string id = start("greet", Json{{"workflow_id", "g-1"}, {"input", {{"name", "Ada"}}}});
  run_to_completion(id);
  expect_error(post(path("/executions/" + id + "/signals/poke"), ""), 409, "conflict", "completed");
  expect_error(post(path("/workflows/greet/executions/g-1/signals/poke"), ""), 409, "conflict",
               "completed");
}

TEST_F(HttpApiTest, exhausted_pool_is_503_with_retry_after_and_recovers) {
  serve(workflows(), engine::EngineConfig{.pool_size = 1, .pool_acquire_timeout = 200ms});
  {
    auto held = engine_->pool().acquire();
    ASSERT_TRUE(held) << held.error().message;
    auto r = post(path("/workflows/greet/start"), Json{{"input", {{"name", "Ada"}}}});
    expect_error(r, 503, "transient", "");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    expect_error(get(path("/executions/6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00")), 503, "transient",
                 "");
  }
  start("greet", Json{{"input", {{"name", "Ada"}}}});
}

TEST_F(HttpApiTest, signals_reach_the_run_by_execution_id_and_by_workflow_id_in_order) {
  serve(workflows());
  start_worker();
  std::string id = start("collector", Json{{"workflow_id", "basket-7"}, {"input", Json::object()}});

  auto first = post(path("/executions/" + id + "/signals/add"),
                    Json{{"payload", {{"n", 1}}}, {"idempotency_key", "add-1"}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(body(first), (Json{{"execution_id", id}, {"outcome", "delivered"}}));
  auto repeat = post(path("/executions/" + id + "/signals/add"),
                     Json{{"payload", {{"n", 1}}}, {"idempotency_key", "add-1"}});
  ASSERT_TRUE(repeat);
  EXPECT_EQ(repeat->status, 200);
  EXPECT_EQ(body(repeat)["outcome"], "duplicate");

  auto second = post(path("/workflows/collector/executions/basket-7/signals/add"),
                     Json{{"payload", {{"n", 2}}}}, {{"Idempotency-Key", "add-2"}});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(body(second), (Json{{"execution_id", id}, {"outcome", "delivered"}}));

  ASSERT_TRUE(wait_status(id, "completed"));
  Json view = body(get(path("/executions/" + id)));
  EXPECT_EQ(view["output"], (Json::array({{{"n", 1}}, {{"n", 2}}})));
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE execution_id = $1", {id}), 2);
}

// The workflow-id reuse policy over HTTP: after the entity's run closed,
// "reject" is 409 and the default starts run 2 (201).
TEST_F(HttpApiTest, signal_with_start_after_close_follows_the_reuse_policy) {
  serve(workflows());
  const std::string p = path("/workflows/collector/signal-with-start");
  auto first = post(p, Json{{"workflow_id", "cart-9"}, {"signal", "add"}});
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 201) << first->body;
  ASSERT_TRUE(db().exec("UPDATE harvest_workflow_executions SET status = 'completed'"));
  auto refused =
      post(p, Json{{"workflow_id", "cart-9"}, {"signal", "add"}, {"workflow_id_reuse", "reject"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409) << refused->body;
  auto bad =
      post(p, Json{{"workflow_id", "cart-9"}, {"signal", "add"}, {"workflow_id_reuse", "maybe"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("workflow_id_reuse"), std::string::npos) << bad->body;
  auto next = post(p, Json{{"workflow_id", "cart-9"}, {"signal", "add"}});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 201) << next->body;
  EXPECT_EQ(body(next)["run"], 2);
  EXPECT_EQ(body(next)["started"], true);
}

TEST_F(HttpApiTest, signal_with_start_is_201_for_the_first_call_then_200_attached) {
  serve(workflows());
  const std::string p = path("/workflows/collector/signal-with-start");
  auto first = post(p, Json{{"workflow_id", "cart-1"},
                            {"input", {{"owner", "ada"}}},
                            {"signal", "add"},
                            {"payload", {{"sku", "A"}}},
                            {"idempotency_key", "line-1"}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201) << first->body;
  Json j = body(first);
  EXPECT_EQ(j["started"], true);
  EXPECT_EQ(j["duplicate_signal"], false);
  std::string id = j["execution_id"];

  auto attach =
      post(p, Json{{"workflow_id", "cart-1"}, {"signal", "add"}}, {{"Idempotency-Key", "line-2"}});
  ASSERT_TRUE(attach);
  EXPECT_EQ(attach->status, 200) << attach->body;
  EXPECT_EQ(
      body(attach),
      (Json{{"execution_id", id}, {"started", false}, {"duplicate_signal", false}, {"run", 1}}));

  auto dup =
      post(p, Json{{"workflow_id", "cart-1"}, {"signal", "add"}, {"idempotency_key", "line-1"}});
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->status, 200);
  EXPECT_EQ(body(dup)["duplicate_signal"], true);

  EXPECT_EQ(text("SELECT start_source FROM harvest_workflow_executions WHERE id = $1", {id}),
            "api");
  EXPECT_EQ(text("SELECT input->>'owner' FROM harvest_workflow_executions WHERE id = $1", {id}),
            "ada");
  EXPECT_EQ(scalar("SELECT count(*) FROM harvest_signals WHERE execution_id = $1", {id}), 2);
  expect_error(post(path("/workflows/greet/signal-with-start"),
                    Json{{"workflow_id", "g"}, {"input", {{"name", 5}}}, {"signal", "s"}}),
               422, "invalid_input", "greet");
}

TEST_F(HttpApiTest, get_execution_shows_status_io_provenance_and_history) {
  serve(workflows());
  std::string id = start("greet", Json{{"workflow_id", "ada"}, {"input", {{"name", "Ada"}}}});
  Json pending = body(get(path("/executions/" + id)));
  EXPECT_EQ(pending["status"], "pending");
  EXPECT_EQ(pending["output"], nullptr);

  run_to_completion(id);
  auto r = get(path("/executions/" + id));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  Json v = body(r);
  EXPECT_EQ(v["execution_id"], id);
  EXPECT_EQ(v["workflow"], "greet");
  EXPECT_EQ(v["workflow_id"], "ada");
  EXPECT_EQ(v["status"], "completed");
  EXPECT_EQ(v["input"], (Json{{"name", "Ada"}}));
  EXPECT_EQ(v["output"], "Hello, Ada!");
  EXPECT_EQ(v["error"], nullptr);
  EXPECT_EQ(v["start_source"], "api");
  EXPECT_EQ(v["start_source_ref"], nullptr);
  EXPECT_EQ(v["attempt"], 1);
  ASSERT_TRUE(v["history"].is_array());
  ASSERT_GE(v["history"].size(), 2u);
  EXPECT_EQ(v["history"][0]["kind"], "WorkflowStarted");
  EXPECT_EQ(v["history"][0]["payload"]["start_source"], "api");
  bool step = false;
  for (const auto& e : v["history"]) {
    step = step || (e["kind"] == "StepCompleted" && e["name"] == "compose" &&
                    e["payload"] == "Hello, Ada!" && e["op_seq"].is_number());
  }
  EXPECT_TRUE(step) << v["history"].dump();
}

TEST_F(HttpApiTest, list_executions_pages_with_a_cursor_and_filters) {
  serve(workflows());
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.insert(start("greet", Json{{"input", {{"name", "n" + std::to_string(i)}}}}));
  }
  start("collector", Json{{"input", Json::object()}});

  std::set<std::string> seen;
  std::vector<size_t> sizes;
  std::string query = path("/executions?workflow=greet&limit=2");
  for (int page = 0; page < 10; ++page) {
    auto r = get(query);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    Json j = body(r);
    sizes.push_back(j["items"].size());
    for (const auto& item : j["items"]) {
      EXPECT_EQ(item["workflow"], "greet");
      EXPECT_EQ(item["start_source"], "api");
      EXPECT_EQ(item["status"], "pending");
      EXPECT_TRUE(seen.insert(item["execution_id"].get<std::string>()).second) << "repeated item";
    }
    if (j["next_cursor"].is_null()) break;
    query = path("/executions?workflow=greet&limit=2&cursor=") +
            httplib::detail::encode_query_param(j["next_cursor"].get<std::string>());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(seen, ids);

  Json all = body(get(path("/executions")));
  EXPECT_EQ(all["items"].size(), 6u);
  EXPECT_EQ(all["next_cursor"], nullptr);
  EXPECT_EQ(body(get(path("/executions?status=completed")))["items"].size(), 0u);
  EXPECT_EQ(body(get(path("/executions?start_source=api&workflow=collector")))["items"].size(), 1u);

  expect_error(get(path("/executions?limit=0")), 400, "bad_request", "'limit'");
  expect_error(get(path("/executions?limit=501")), 400, "bad_request", "'limit'");
  expect_error(get(path("/executions?limit=two")), 400, "bad_request", "'limit'");
  expect_error(get(path("/executions?state=pending")), 400, "bad_request", "'state'");
}

TEST_F(HttpApiTest, keep_alive_serves_two_requests_on_one_connection) {
  serve(workflows());
  httplib::Client c = client();
  c.set_keep_alive(true);
  int sockets = 0;
  c.set_socket_options([&](auto) { ++sockets; });
  auto a = c.Post(path("/workflows/greet/start"), Json{{"input", {{"name", "A"}}}}.dump(),
                  "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 201);
  EXPECT_NE(a->get_header_value("Connection"), "close");
  auto b = c.Get(path("/executions?limit=1"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(sockets, 1) << "the second request should reuse the first connection";
}

TEST_F(HttpApiTest, healthz_is_200_while_the_database_answers_and_503_when_it_does_not) {
  serve(workflows());
  auto ok = get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  Json j = body(ok);
  EXPECT_EQ(j["status"], "ok");
  ASSERT_EQ(j["shards"].size(), 1u);
  EXPECT_EQ(j["shards"][0]["readable"], true);
  EXPECT_EQ(j["shards"][0]["location"].get<std::string>().find("harvest@"), std::string::npos)
      << "no credentials in the location";

  // Take the database away: refuse new connections and end the open ones.
  auto admin = store::Connection::open(testing::admin_url());
  ASSERT_TRUE(admin);
  ASSERT_TRUE((*admin)->exec("ALTER DATABASE " + store::quote_ident(db_name_) +
                             " WITH ALLOW_CONNECTIONS false"));
  ASSERT_TRUE((*admin)->exec(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", {db_name_}));
  auto down = get("/healthz");
  expect_error(down, 503, "transient", "not readable");
  EXPECT_EQ(body(down)["shards"][0]["readable"], false);
  expect_error(post(path("/workflows/greet/start"), Json{{"input", {{"name", "Ada"}}}}), 503,
               "transient", "");

  ASSERT_TRUE((*admin)->exec("ALTER DATABASE " + store::quote_ident(db_name_) +
                             " WITH ALLOW_CONNECTIONS true"));
  EXPECT_TRUE(eventually([&] {
    auto r = get("/healthz");
    return r && r->status == 200;
  }));
}

TEST_F(HttpApiTest, metrics_without_an_exporter_is_404_saying_how_to_enable_it) {
  auto engine = open_engine(workflows());
  ASSERT_TRUE(engine);
  api::HttpServer server(*engine, api::ApiConfig{.port = 0});
  ASSERT_TRUE(server.start());
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/metrics");
  expect_error(r, 404, "not_found", "PrometheusMetrics");
  server.stop();
}

TEST_F(HttpApiTest, a_custom_prefix_moves_the_routes_but_not_healthz_or_metrics) {
  serve(workflows(), {}, api::ApiConfig{.prefix = "/v1"});
  auto r = post("/v1/workflows/greet/start", Json{{"input", {{"name", "Ada"}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  expect_error(post(path("/workflows/greet/start"), Json{{"input", {{"name", "Ada"}}}}), 404,
               "not_found", "no route");
  auto h = get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
}

TEST_F(HttpApiTest, bad_config_is_refused_at_start_naming_the_field) {
  auto engine = open_engine(workflows());
  ASSERT_TRUE(engine);
  api::HttpServer bad_prefix(*engine, api::ApiConfig{.port = 0, .prefix = "api/"});
  auto r = bad_prefix.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::kConfig);
  EXPECT_NE(r.error().message.find("ApiConfig::prefix"), std::string::npos);

  api::HttpServer first(*engine, api::ApiConfig{.port = 0});
  ASSERT_TRUE(first.start());
  api::HttpServer clash(*engine, api::ApiConfig{.port = first.port()});
  auto taken = clash.start();
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().kind, ErrorKind::kConfig);
  EXPECT_NE(taken.error().message.find(std::to_string(first.port())), std::string::npos);
}

}  // namespace
}  // namespace harvest::api
