// ENG-12: the handlers accept exactly the request-body members and query
// parameters route_specs declares (and require exactly its required members),
// over real HTTP: the table docs/openapi.yaml is checked against is the one
// the server enforces.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>

#include "api_fixture.hpp"
#include <harvest/api/routes.hpp>

namespace harvest::api {
namespace {

using testing::Json;

engine::WorkflowRegistry workflows() {
  engine::WorkflowRegistry r;
  r.add("echo", [](engine::WorkflowContext&, Json in) { return in; });
  r.add("waiter", [](engine::WorkflowContext& ctx, Json) {
    return ctx.wait_signal("never", std::chrono::hours(1)).value_or(Json());
  });
  return r;
}

class RouteSpecsTest : public testing::ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    serve(workflows());
    auto r = post(std::string(kPrefix) + "/workflows/waiter/start",
                  Json{{"workflow_id", "w-1"}, {"input", Json::object()}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    execution_id_ = Json::parse(r->body).at("execution_id").get<std::string>();
  }

  // The spec's path with its placeholders filled: an open execution, so a
  // request that passes validation reaches the engine and succeeds.
  std::string fill(const std::string& path) const {
    std::string out = path;
    auto put = [&](const std::string& name, const std::string& value) {
      for (size_t at; (at = out.find("{" + name + "}")) != std::string::npos;) {
        out.replace(at, name.size() + 2, value);
      }
    };
    put("name", path.find("/executions/{workflow_id}") != std::string::npos ? "waiter" : "echo");
    put("execution_id", execution_id_);
    put("workflow_id", "w-1");
    put("signal", "poke");
    put("id", "00000000-0000-0000-0000-000000000000");
    EXPECT_EQ(out.find('{'), std::string::npos) << "a placeholder this test cannot fill: " << path;
    return out;
  }

  // A valid value for every member a route may accept; a member added to
  // routes.hpp needs one here.
  Json valid_body(const RouteSpec& r) {
    Json body = Json::object();
    for (auto f : r.body_fields) {
      const std::string field(f);
      if (field == "workflow_id") {
        body[field] = "wf-" + std::to_string(++counter_);
      } else if (field == "idempotency_key") {
        body[field] = "key-" + std::to_string(++counter_);
      } else if (field == "input" || field == "payload") {
        body[field] = Json::object();
      } else if (field == "signal") {
        body[field] = "poke";
      } else if (field == "workflow_id_reuse") {
        body[field] = "allow_after_close";
      } else if (field == "id") {
        body[field] = "00000000-0000-0000-0000-000000000000";
      } else if (field == "binding" || field == "stream" || field == "requested_by") {
        body[field] = "ops-" + field;
      } else if (field == "reason") {
        body[field] = "undecodable";
      } else if (field == "workflow") {
        body[field] = "waiter";
      } else if (field == "status") {
        body[field] = "pending";
      } else if (field == "dry_run") {
        body[field] = true;
      } else if (field == "since" || field == "until") {
        body[field] = field == "since" ? "2000-01-01T00:00:00Z" : "2100-01-01T00:00:00Z";
      } else {
        ADD_FAILURE() << "no test value for body member '" << field << "' of " << r.name;
      }
    }
    return body;
  }

  static std::string message(const httplib::Result& res) {
    return res ? Json::parse(res->body, nullptr, false).value("message", "") : "";
  }

  static std::string joined(std::span<const std::string_view> names) {
    std::string out;
    for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
  }

  std::string execution_id_;
  int counter_ = 0;
};

TEST_F(RouteSpecsTest, handlers_accept_exactly_the_declared_body_members) {
  int checked = 0;
  for (const auto& r : route_specs(kPrefix)) {
    if (r.body_fields.empty()) continue;
    SCOPED_TRACE(r.name);
    ++checked;
    const std::string url = fill(r.path);

    auto all = post(url, valid_body(r));
    ASSERT_TRUE(all);
    EXPECT_LT(all->status, 300) << "every declared member at once: " << all->body;

    Json extra = valid_body(r);
    extra["not_a_member"] = 1;
    auto refused = post(url, extra);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400);
    EXPECT_EQ(message(refused),
              "unknown field 'not_a_member' in request body; this route accepts " +
                  joined(r.body_fields));

    // Leaving a member out is a 400 naming it exactly when it is required.
    for (auto f : r.body_fields) {
      Json without = valid_body(r);
      without.erase(std::string(f));
      auto res = post(url, without);
      ASSERT_TRUE(res);
      const bool required =
          std::ranges::find(r.required_body_fields, f) != r.required_body_fields.end();
      if (required) {
        EXPECT_EQ(res->status, 400) << f << ": " << res->body;
        EXPECT_NE(message(res).find("'" + std::string(f) + "'"), std::string::npos)
            << f << ": " << res->body;
      } else {
        EXPECT_LT(res->status, 300) << "without " << f << ": " << res->body;
      }
    }
  }
  EXPECT_EQ(checked, 10)
      << "start, signal-with-start, the two signal routes, cancel and terminate (one run and "
         "bulk), connector dead-letter replay and purge";
}

TEST_F(RouteSpecsTest, handlers_accept_exactly_the_declared_query_parameters) {
  for (const auto& r : route_specs(kPrefix)) {
    if (r.method != Method::kGet || r.control) continue;
    SCOPED_TRACE(r.name);
    const std::string url = fill(r.path);
    auto refused = get(url + "?not_a_parameter=1");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400);
    EXPECT_EQ(message(refused), "unknown query parameter 'not_a_parameter'; this route accepts " +
                                    joined(r.query_params));
    for (auto q : r.query_params) {
      auto res = get(url + "?" + std::string(q) + "=1");
      ASSERT_TRUE(res);
      EXPECT_EQ(message(res).find("unknown query parameter"), std::string::npos)
          << q << ": " << res->body;
    }
  }
}

}  // namespace
}  // namespace harvest::api
