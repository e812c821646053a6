// ENG-17 over HTTP: POST /executions/{id}/cancel|terminate and the bulk
// forms, with their statuses (202 recorded, 200 repeat or terminated, 404,
// 409, 400) and what they did to the runs.
#include <gtest/gtest.h>

#include "api_fixture.hpp"

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;

class CancelTerminateApiTest : public testing::ApiTest {
 protected:
  static std::string path(const std::string& rest) { return std::string(kPrefix) + rest; }
  std::string start(const std::string& workflow) {
    auto r = post(path("/workflows/" + workflow + "/start"), Json{{"input", 1}});
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
    return body(r)["execution_id"];
  }
};

TEST_F(CancelTerminateApiTest, cancel_is_accepted_then_seen_by_the_run_and_repeats_are_idempotent) {
  engine::WorkflowRegistry r;
  r.add("waits", [](WorkflowContext& ctx, int) {
    (void)ctx.wait_signal("never", std::chrono::hours(1));
    return 0;
  });
  serve(std::move(r));
  start_worker();
  const std::string id = start("waits");
  ASSERT_TRUE(
      eventually([&] { return body(get(path("/executions/" + id)))["status"] == "waiting"; }));

  auto c = post(path("/executions/" + id + "/cancel"),
                Json{{"reason", "duplicate order"}, {"requested_by", "ops:alice"}});
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 202) << c->body;
  EXPECT_EQ(body(c)["outcome"], "cancel_requested");
  ASSERT_TRUE(
      eventually([&] { return body(get(path("/executions/" + id)))["status"] == "cancelled"; }));
  Json view = body(get(path("/executions/" + id)));
  bool recorded = false;
  for (const auto& h : view["history"]) {
    if (h["kind"] == "CancelRequested") {
      recorded = h["payload"]["reason"] == "duplicate order" &&
                 h["payload"]["requested_by"] == "ops:alice";
    }
  }
  EXPECT_TRUE(recorded) << view.dump();

  auto again = post(path("/executions/" + id + "/cancel"), Json{{"reason", "again"}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(body(again)["outcome"], "already_requested");
  auto term = post(path("/executions/" + id + "/terminate"), Json{{"reason", "too late"}});
  ASSERT_TRUE(term);
  EXPECT_EQ(term->status, 409) << term->body;
  EXPECT_EQ(body(term)["error"], "conflict");
}

TEST_F(CancelTerminateApiTest, terminate_unknown_ids_and_bad_bodies_answer_clear_errors) {
  engine::WorkflowRegistry r;
  r.add("w", [](WorkflowContext&, int n) { return n; });
  serve(std::move(r));
  const std::string id = start("w");

  auto t = post(path("/executions/" + id + "/terminate"), Json{{"reason", "bad deploy"}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(body(t)["outcome"], "terminated");
  EXPECT_EQ(body(t)["status"], "terminated");
  auto t2 = post(path("/executions/" + id + "/terminate"), Json{{"reason", "bad deploy"}});
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->status, 200);
  EXPECT_EQ(body(t2)["outcome"], "already_terminated");

  auto unknown =
      post(path("/executions/7b0e0b6e-2f7d-4a53-9f7e-000000000000/cancel"), Json{{"reason", "x"}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto no_reason = post(path("/executions/" + id + "/cancel"), Json::object());
  ASSERT_TRUE(no_reason);
  EXPECT_EQ(no_reason->status, 400);
  EXPECT_NE(no_reason->body.find("reason"), std::string::npos) << no_reason->body;
  auto too_long =
      post(path("/executions/" + id + "/terminate"), Json{{"reason", std::string(2000, 'r')}});
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400);
  EXPECT_NE(too_long->body.find("1024"), std::string::npos) << too_long->body;
  auto unknown_field =
      post(path("/executions/" + id + "/cancel"), Json{{"reason", "x"}, {"force", true}});
  ASSERT_TRUE(unknown_field);
  EXPECT_EQ(unknown_field->status, 400);
}

TEST_F(CancelTerminateApiTest, bulk_routes_preview_then_act_on_one_workflows_open_runs) {
  engine::WorkflowRegistry r;
  r.add("a", [](WorkflowContext&, int n) { return n; });
  r.add("b", [](WorkflowContext&, int n) { return n; });
  serve(std::move(r));
  for (int i = 0; i < 3; ++i) start("a");
  const std::string other = start("b");

  auto preview = post(path("/executions/terminate"),
                      Json{{"workflow", "a"}, {"reason", "rollback"}, {"dry_run", true}});
  ASSERT_TRUE(preview);
  ASSERT_EQ(preview->status, 200) << preview->body;
  EXPECT_EQ(body(preview), (Json{{"matched", 3}, {"terminated", 0}, {"dry_run", true}}));
  auto done = post(path("/executions/terminate"), Json{{"workflow", "a"}, {"reason", "rollback"}});
  ASSERT_TRUE(done);
  EXPECT_EQ(body(done), (Json{{"matched", 3}, {"terminated", 3}, {"dry_run", false}}));
  EXPECT_EQ(body(get(path("/executions/" + other)))["status"], "pending");
  auto listed = body(get(path("/executions?status=terminated")));
  EXPECT_EQ(listed["items"].size(), 3u);

  auto cancel = post(path("/executions/cancel"),
                     Json{{"workflow", "b"}, {"status", "pending"}, {"reason", "drain"}});
  ASSERT_TRUE(cancel);
  EXPECT_EQ(body(cancel), (Json{{"matched", 1}, {"cancel_requested", 1}, {"dry_run", false}}));
  auto no_workflow = post(path("/executions/cancel"), Json{{"reason", "drain"}});
  ASSERT_TRUE(no_workflow);
  EXPECT_EQ(no_workflow->status, 400);
  auto closed = post(path("/executions/cancel"),
                     Json{{"workflow", "b"}, {"status", "completed"}, {"reason", "x"}});
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->status, 400);
  auto bad_dry = post(path("/executions/cancel"),
                      Json{{"workflow", "b"}, {"reason", "x"}, {"dry_run", "yes"}});
  ASSERT_TRUE(bad_dry);
  EXPECT_EQ(bad_dry->status, 400);
}

}  // namespace
}  // namespace harvest::api
