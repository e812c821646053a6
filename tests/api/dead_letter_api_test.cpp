// ENG-14 over HTTP: a run that exhausts its retries is listed by
// GET /dead-letters, and POST /dead-letters/{id}/replay re-runs it to
// completion.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

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

// The engine's dead letters page past any one answer by cursor: every one is
// listed once, newest failure first, and the last page says so.
TEST_F(DeadLetterApiTest, the_list_pages_by_cursor_through_every_dead_letter) {
  engine::WorkflowRegistry r;
  r.add(
      "doomed", [](WorkflowContext&, Json) -> Json { throw std::runtime_error("no"); },
      engine::WorkflowOptions{.max_attempts = 1, .retry_backoff = 10ms});
  serve(std::move(r));
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto s = post(path("/workflows/doomed/start"), Json{{"input", i}});
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 201) << s->body;
    ids.insert(body(s)["execution_id"].get<std::string>());
  }
  start_worker();
  ASSERT_TRUE(
      eventually([&] { return scalar("SELECT count(*) FROM harvest_engine_dead_letters") == 5; }));
  std::vector<std::string> seen;
  std::vector<std::string> failed_at;
  std::string cursor;
  int pages = 0;
  while (pages < 10) {
    Json page = body(get(
        path("/dead-letters?limit=2" +
             (cursor.empty() ? "" : "&cursor=" + httplib::detail::encode_query_param(cursor)))));
    ++pages;
    for (const auto& d : page["items"]) {
      seen.push_back(d["execution_id"]);
      failed_at.push_back(d["failed_at"]);
    }
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), ids);
  EXPECT_EQ(seen.size(), 5u) << "none twice";
  EXPECT_TRUE(std::is_sorted(failed_at.rbegin(), failed_at.rend())) << "newest first";
  auto bad = get(path("/dead-letters?cursor=oops"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("'cursor'"), std::string::npos) << bad->body;
}

}  // namespace
}  // namespace harvest::api
