// Bounded JSON parsing (hardening: parser limits).
#include <gtest/gtest.h>

#include <string>

#include <harvest/common/json.hpp>

namespace harvest {
namespace {

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(Json, parses_within_the_limits) {
  auto j = parse_json(R"({"a":[1,{"b":"c"}]})");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ((*j)["a"][1]["b"], "c");
  EXPECT_TRUE(parse_json(nested(128)));
}

TEST(Json, refuses_one_level_past_the_depth_limit_by_name) {
  auto j = parse_json(nested(129));
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(j.error().message.find("limit of 128 levels"), std::string::npos);
}

TEST(Json, a_hostile_depth_does_not_exhaust_the_stack) {
  auto j = parse_json(std::string(1'000'000, '['), JsonLimits{.max_bytes = 2'000'000});
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("deeper"), std::string::npos);
}

TEST(Json, refuses_text_over_the_size_limit) {
  auto j = parse_json("\"" + std::string(100, 'x') + "\"", JsonLimits{.max_bytes = 50});
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("limit of 50 bytes"), std::string::npos);
}

TEST(Json, malformed_text_names_the_position) {
  auto j = parse_json("{\"a\": }");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("malformed JSON at byte"), std::string::npos);
}

TEST(Json, depth_and_nul_checks_on_built_values) {
  Json deep = Json::array();
  Json* at = &deep;
  for (int i = 0; i < 200; ++i) {
    at->push_back(Json::array());
    at = &(*at)[0];
  }
  EXPECT_FALSE(check_json_depth(deep, 128));
  EXPECT_TRUE(check_json_depth(deep, 500));
  EXPECT_FALSE(check_json_storable(Json{{"k", std::string("a\0b", 3)}}));
  EXPECT_FALSE(check_json_storable(Json{{std::string("k\0", 2), 1}}));
  EXPECT_TRUE(check_json_storable(Json{{"k", "fine"}}));
}

}  // namespace
}  // namespace harvest
