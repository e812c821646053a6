// The HTTP API's request-target parsing, route matching and access checks
// (hardening against hostile requests), without sockets.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include <harvest/api/guard.hpp>
#include <harvest/api/http_server.hpp>
#include <harvest/api/router.hpp>

namespace harvest::api {
namespace {

TEST(Router, targets_split_into_decoded_segments_and_a_first_wins_query) {
  auto t = parse_target("/api/a%20b/c?x=1&y=a+b%21&x=2&flag");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->segments, (std::vector<std::string>{"api", "a b", "c"}));
  EXPECT_EQ(t->query.at("x"), "1");
  EXPECT_EQ(t->query.at("y"), "a b!");
  EXPECT_EQ(t->query.at("flag"), "");
  EXPECT_FALSE(parse_target("/a%2"));
  EXPECT_FALSE(parse_target("/a%zz"));
  EXPECT_FALSE(parse_target("http://host/a"));
  EXPECT_FALSE(parse_target("/a?x=%G0"));
}

TEST(Router, captures_match_one_segment_and_a_known_path_under_another_method_is_flagged) {
  std::vector<RoutePattern> table{route_pattern(Method::kPost, "/w/{}/start"),
                                  route_pattern(Method::kGet, "/e/{}")};
  auto m = match_route(table, Method::kPost, {"w", "greet", "start"});
  ASSERT_TRUE(m.route);
  EXPECT_EQ(*m.route, 0u);
  EXPECT_EQ(m.captures, (std::vector<std::string>{"greet"}));
  m = match_route(table, Method::kGet, {"w", "greet", "start"});
  EXPECT_FALSE(m.route);
  EXPECT_TRUE(m.path_known);
  // A decoded '/' or an empty segment is no capture.
  EXPECT_FALSE(match_route(table, Method::kGet, {"e", "a/b"}).route);
  EXPECT_FALSE(match_route(table, Method::kGet, {"e", ""}).route);
  EXPECT_FALSE(match_route(table, Method::kGet, {"e", "x", ""}).path_known);
}

TEST(Guard, hosts_compare_by_name_without_port_and_default_to_loopback) {
  auto allowed = default_allowed_hosts("127.0.0.1");
  for (const char* h : {"localhost", "LOCALHOST:8080", "127.0.0.1:1", "[::1]:8080", "[::1]"}) {
    EXPECT_TRUE(host_allowed(h, allowed)) << h;
  }
  for (const char* h : {"evil.example", "localhost.evil.example", "127.0.0.2", ""}) {
    EXPECT_FALSE(host_allowed(h, allowed)) << h;
  }
  EXPECT_TRUE(host_allowed("10.0.0.5:80", default_allowed_hosts("10.0.0.5")));
  EXPECT_FALSE(host_allowed("10.0.0.5", default_allowed_hosts("0.0.0.0")));
  EXPECT_TRUE(host_allowed("anything", {"*"}));
  EXPECT_TRUE(is_loopback_host("127.1.2.3"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
}

TEST(Guard, bearer_tokens_match_exactly_and_content_types_by_media_type) {
  EXPECT_TRUE(bearer_matches("Bearer abc", "abc"));
  EXPECT_TRUE(bearer_matches("bearer abc ", "abc"));
  EXPECT_FALSE(bearer_matches("Bearer abcd", "abc"));
  EXPECT_FALSE(bearer_matches("Bearer ab", "abc"));
  EXPECT_FALSE(bearer_matches("Basic abc", "abc"));
  EXPECT_FALSE(bearer_matches("", "abc"));
  EXPECT_TRUE(is_json_content_type("application/json"));
  EXPECT_TRUE(is_json_content_type("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(is_json_content_type("text/plain"));
  EXPECT_FALSE(is_json_content_type("application/x-www-form-urlencoded"));
  EXPECT_FALSE(is_json_content_type(""));
}

TEST(ApiConfigEnv, token_comes_from_the_variable_or_a_file_never_both) {
  ::unsetenv("HARVEST_API_TOKEN");
  ::unsetenv("HARVEST_API_TOKEN_FILE");
  ::setenv("HARVEST_API_TOKEN", "tok", 1);
  auto c = api_config_from_env();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->token, "tok");
  const std::string file = ::testing::TempDir() + "/harvest_token";
  std::ofstream(file) << "  from-file\n";
  ::setenv("HARVEST_API_TOKEN_FILE", file.c_str(), 1);
  EXPECT_FALSE(api_config_from_env());
  ::unsetenv("HARVEST_API_TOKEN");
  c = api_config_from_env();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->token, "from-file");
  ::setenv("HARVEST_API_TOKEN_FILE", "/nonexistent/token", 1);
  auto missing = api_config_from_env();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("HARVEST_API_TOKEN_FILE"), std::string::npos);
  ::unsetenv("HARVEST_API_TOKEN_FILE");
  ::setenv("HARVEST_HTTP_PORT", "80a", 1);
  EXPECT_FALSE(api_config_from_env());
  ::unsetenv("HARVEST_HTTP_PORT");
}

}  // namespace
}  // namespace harvest::api
