// ENG-12: docs/openapi.yaml describes exactly the API the server serves. The
// route table (route_specs) is the truth: every route, method, status, path
// and query parameter and request-body member in it must be in the document,
// and the document may hold nothing the code does not. Response schemas are
// checked against what views.cpp renders.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "block_yaml.hpp"
#include <harvest/api/routes.hpp>
#include <harvest/api/views.hpp>

namespace harvest::api {
namespace {

using nlohmann::json;
using Set = std::set<std::string>;

const std::string kPrefix = "/api/harvest";  // the document's paths use the default prefix

const json& doc() {
  static const json d = harvest::testing::BlockYaml::parse_file(std::string(HARVEST_SOURCE_DIR) +
                                                                "/docs/openapi.yaml");
  return d;
}

// `node`, or the component its `$ref` names (refs may chain).
const json& resolve(const json& node) {
  const json* n = &node;
  for (int hops = 0; n->is_object() && n->contains("$ref"); ++hops) {
    if (hops > 8) throw std::runtime_error("$ref loop");
    const std::string ref = n->at("$ref").get<std::string>();
    if (!ref.starts_with("#/")) throw std::runtime_error("external $ref " + ref);
    n = &doc().at(json::json_pointer(ref.substr(1)));
  }
  return *n;
}

std::string method_name(Method m) {
  return m == Method::kGet ? "get" : m == Method::kPost ? "post" : "other";
}

Set keys(const json& object) {
  Set out;
  for (const auto& [k, v] : object.items()) out.insert(k);
  return out;
}

template <typename Range>
Set as_set(const Range& r) {
  return Set(std::begin(r), std::end(r));
}

// The operation documenting `r`; null (and a failure naming it) when absent.
const json* operation(const RouteSpec& r) {
  const json& paths = doc().at("paths");
  if (!paths.contains(r.path) || !paths.at(r.path).contains(method_name(r.method))) {
    ADD_FAILURE() << "no operation for " << method_name(r.method) << " " << r.path;
    return nullptr;
  }
  return &paths.at(r.path).at(method_name(r.method));
}

// Names of the operation's parameters that are `in` this place.
Set parameters(const json& op, const std::string& in) {
  Set out;
  if (!op.contains("parameters")) return out;
  for (const auto& p : op.at("parameters")) {
    const json& param = resolve(p);
    if (param.at("in") == in) {
      EXPECT_TRUE(out.insert(param.at("name").get<std::string>()).second)
          << "parameter listed twice: " << param.at("name");
      if (in == "path") {
        EXPECT_EQ(param.value("required", false), true) << param.at("name");
      }
    }
  }
  return out;
}

Set placeholders(const std::string& path) {
  Set out;
  for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open + 1)) {
    out.insert(path.substr(open + 1, path.find('}', open) - open - 1));
  }
  return out;
}

const std::vector<RouteSpec>& specs() {
  static const auto s = route_specs(kPrefix);
  return s;
}

TEST(OpenApi, document_is_openapi_3_in_the_supported_yaml_subset) {
  ASSERT_NO_THROW((void)doc());
  ASSERT_TRUE(doc().contains("openapi"));
  EXPECT_TRUE(doc().at("openapi").get<std::string>().starts_with("3.")) << doc().at("openapi");
  EXPECT_TRUE(doc().at("info").contains("title"));
  EXPECT_TRUE(doc().at("info").contains("version"));
}

TEST(OpenApi, every_route_and_method_in_the_code_is_documented_and_no_other) {
  Set in_code, in_doc;
  for (const auto& r : specs()) in_code.insert(method_name(r.method) + " " + r.path);
  static const Set kMethods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};
  for (const auto& [path, item] : doc().at("paths").items()) {
    for (const auto& [method, op] : item.items()) {
      if (kMethods.contains(method)) in_doc.insert(method + " " + path);
    }
  }
  EXPECT_EQ(in_doc, in_code);
}

TEST(OpenApi, every_status_a_route_answers_is_documented_and_no_other) {
  for (const auto& r : specs()) {
    Set code;
    for (int s : r.statuses) code.insert(std::to_string(s));
    if (const json* op = operation(r)) {
      EXPECT_EQ(keys(op->at("responses")), code) << r.name << " " << r.path;
    }
  }
}

TEST(OpenApi, path_and_query_parameters_match_the_route_table) {
  for (const auto& r : specs()) {
    const json* found = operation(r);
    if (!found) continue;
    const json& op = *found;
    EXPECT_EQ(parameters(op, "path"), placeholders(r.path)) << r.name;
    EXPECT_EQ(parameters(op, "query"), as_set(r.query_params)) << r.name;
  }
}

TEST(OpenApi, request_body_members_are_exactly_those_the_handlers_accept) {
  for (const auto& r : specs()) {
    const json* found = operation(r);
    if (!found) continue;
    const json& op = *found;
    if (r.body_fields.empty()) {
      EXPECT_FALSE(op.contains("requestBody")) << r.name << " takes no body";
      continue;
    }
    ASSERT_TRUE(op.contains("requestBody")) << r.name;
    const json& body = resolve(op.at("requestBody"));
    EXPECT_EQ(body.value("required", false), !r.required_body_fields.empty())
        << r.name << ": a body is required exactly when a member is";
    EXPECT_EQ(keys(body.at("content")), Set{"application/json"}) << r.name;
    const json& schema = resolve(body.at("content").at("application/json").at("schema"));
    EXPECT_EQ(keys(schema.at("properties")), as_set(r.body_fields)) << r.name;
    Set required;
    if (schema.contains("required")) required = schema.at("required").get<Set>();
    EXPECT_EQ(required, as_set(r.required_body_fields)) << r.name;
    EXPECT_EQ(schema.value("additionalProperties", true), false)
        << r.name << ": an unknown member is a 400, so the schema must say so";
  }
}

TEST(OpenApi, bearer_security_on_every_route_but_healthz_and_optional_on_metrics) {
  const json bearer = json::array({json{{"bearerAuth", json::array()}}});
  const json& scheme = doc().at("components").at("securitySchemes").at("bearerAuth");
  EXPECT_EQ(scheme.at("type"), "http");
  EXPECT_EQ(scheme.at("scheme"), "bearer");
  EXPECT_EQ(doc().at("security"), bearer);
  for (const auto& r : specs()) {
    const json* found = operation(r);
    if (!found) continue;
    const json& op = *found;
    const json& effective = op.contains("security") ? op.at("security") : doc().at("security");
    switch (r.auth) {
      case RouteAuth::kToken:
        EXPECT_EQ(effective, bearer) << r.name;
        break;
      case RouteAuth::kNone:
        EXPECT_EQ(effective, json::array()) << r.name;
        break;
      case RouteAuth::kOptional:
        EXPECT_EQ(effective, json::array({json::object(), json{{"bearerAuth", json::array()}}}))
            << r.name;
        break;
    }
  }
}

TEST(OpenApi, every_error_answer_has_the_error_schema) {
  const json& error = doc().at("components").at("schemas").at("Error");
  EXPECT_EQ(keys(error.at("properties")), (Set{"error", "message", "request_id"}));
  EXPECT_EQ(error.at("required").get<Set>(), (Set{"error", "message", "request_id"}));
  for (const auto& r : specs()) {
    const json* op = operation(r);
    if (!op) continue;
    for (const auto& [status, response] : op->at("responses").items()) {
      if (status < "400") continue;
      const json& content = resolve(response).at("content");
      ASSERT_TRUE(content.contains("application/json")) << r.name << " " << status;
      const json& schema = resolve(content.at("application/json").at("schema"));
      // /healthz's 503 adds the shard list to the error members.
      for (const auto& member : {"error", "message", "request_id"}) {
        EXPECT_TRUE(schema.at("properties").contains(member))
            << r.name << " " << status << " lacks " << member;
      }
    }
  }
}

// Members the views render, from values with every optional set.
TEST(OpenApi, response_schemas_list_exactly_the_members_the_views_render) {
  const json& schemas = doc().at("components").at("schemas");
  engine::HistoryEvent event{.id = 1, .op_seq = 1, .kind = "k", .name = "n", .payload = 1};
  engine::ExecutionView view;
  view.history.push_back(event);
  engine::ExecutionSummary summary;
  engine::ExecutionPage page{.items = {summary}, .next_cursor = "c"};
  engine::EngineDeadLetter dead;
  engine::ShardStatus shard;
  connector_dlq::StoredDeadLetter connector_dead;
  connector_dlq::ReplayRequest replay_request;
  const std::map<std::string, json> rendered = {
      {"HistoryEvent", to_json(event)},
      {"Execution", to_json(view)},
      {"ExecutionSummary", to_json(summary)},
      {"ExecutionPage", to_json(page)},
      {"DeadLetter", to_json(dead)},
      {"Shard", to_json(shard)},
      {"ConnectorDeadLetter", to_json(connector_dead)},
      {"ConnectorDeadLetterDetail", to_json_detail(connector_dead)},
      {"ConnectorDeadLetterReplay", to_json(replay_request)},
      {"Binding", to_json(BindingOverview{})},
  };
  for (const auto& [name, j] : rendered) {
    ASSERT_TRUE(schemas.contains(name)) << name;
    EXPECT_EQ(keys(schemas.at(name).at("properties")), keys(j)) << name;
  }
}

}  // namespace
}  // namespace harvest::api
