// ENG-14 over HTTP: a run that exhausts its retries is listed by
// GET /dead-letters, and POST /dead-letters/{id}/replay re-runs it to
// completion.
#include <gtest/gtest.h>

#include <atomic>

#include "api_fixture.hpp"

namespace harvest::api {
namespace {

using namespace std::chrono_literals;
using engine::WorkflowContext;
using testing::Json;

class DeadLetterApiTest : public testing::ApiTest {
 protected:
  static std::string path(const std::string& rest) { return std::string(kPrefix) + rest; }
};

TEST_F(DeadLetterApiTest, exhausted_run_is_listed_then_replayed_to_completion) {
  auto succeed = std::make_shared<std::atomic<bool>>(false);
  auto calls = std::make_shared<std::atomic<int>>(0);
  engine::WorkflowRegistry r;
  r.add(
      "charge",
      [succeed, calls](WorkflowContext& ctx, Json in) {
        return ctx.step("charge_card", [&] {
          ++*calls;
          if (!*succeed) throw std::runtime_error("card declined");
          return in.value("cents", 0);
        });
      },
      engine::WorkflowOptions{.max_attempts = 2, .retry_backoff = 10ms});
  serve(std::move(r));
  start_worker();

  auto started = post(path("/workflows/charge/start"),
                      Json{{"workflow_id", "invoice-9"}, {"input", {{"cents", 1250}}}});
  ASSERT_TRUE(started);
  ASSERT_EQ(started->status, 201) << started->body;
  std::string id = body(started)["execution_id"];

  Json listed;
  ASSERT_TRUE(eventually([&] {
    auto res = get(path("/dead-letters"));
    if (!res || res->status != 200) return false;
    listed = Json::parse(res->body);
    return listed["items"].size() == 1;
  })) << listed.dump();
  const Json& dead = listed["items"][0];
  EXPECT_EQ(dead["execution_id"], id);
  EXPECT_EQ(dead["workflow"], "charge");
  EXPECT_EQ(dead["workflow_id"], "invoice-9");
  EXPECT_EQ(dead["attempts"], 2);
  EXPECT_NE(dead["error"].get<std::string>().find("card declined"), std::string::npos);
  EXPECT_EQ(calls->load(), 2);
  Json failed = body(get(path("/executions/" + id)));
  EXPECT_NE(failed["error"].get<std::string>().find("card declined"), std::string::npos);
  EXPECT_EQ(body(get(path("/dead-letters?limit=1")))["items"].size(), 1u);

  // The cause is fixed; replay runs it again to completion.
  succeed->store(true);
  auto replayed = post(path("/dead-letters/" + id + "/replay"), "");
  ASSERT_TRUE(replayed);
  EXPECT_EQ(replayed->status, 200) << replayed->body;
  EXPECT_EQ(body(replayed), (Json{{"execution_id", id}, {"outcome", "replayed"}}));
  ASSERT_TRUE(wait_status(id, "completed"));
  EXPECT_EQ(body(get(path("/executions/" + id)))["output"], 1250);
  EXPECT_EQ(body(get(path("/dead-letters")))["items"].size(), 0u);

  // Not (or no longer) a dead letter: 404.
  auto again = post(path("/dead-letters/" + id + "/replay"), "");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404) << again->body;
  EXPECT_EQ(body(again)["error"], "not_found");
  auto unknown = post(path("/dead-letters/6b1f3a34-7a9e-4c47-a0a2-1d8c1f2b9f00/replay"), "");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto bad_limit = get(path("/dead-letters?limit=0"));
  ASSERT_TRUE(bad_limit);
  EXPECT_EQ(bad_limit->status, 400);
}

}  // namespace
}  // namespace harvest::api
