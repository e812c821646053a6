// common/url: the URL parts harvest's own HTTP clients use.
#include <gtest/gtest.h>

#include <harvest/common/url.hpp>

namespace harvest {
namespace {

TEST(UrlTest, splits_scheme_host_port_path_and_query) {
  auto u = parse_url("HTTPS://sqs.eu-west-1.amazonaws.com:8443/123/q?a=1#frag");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "sqs.eu-west-1.amazonaws.com");
  EXPECT_EQ(u->port, "8443");
  EXPECT_EQ(u->path, "/123/q");
  EXPECT_EQ(u->query, "a=1");
  EXPECT_TRUE(u->path_given);
  EXPECT_EQ(u->target(), "/123/q?a=1");
  EXPECT_EQ(u->authority(), "sqs.eu-west-1.amazonaws.com:8443");
}

TEST(UrlTest, a_url_without_a_path_says_so) {
  auto u = parse_url("http://127.0.0.1:9324");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->path, "/");
  EXPECT_FALSE(u->path_given);
  EXPECT_TRUE(parse_url("http://h/")->path_given);
  EXPECT_EQ(parse_url("http://h?x=1")->target(), "/?x=1");
}

TEST(UrlTest, ipv6_literals_lose_their_brackets_and_get_them_back_in_the_authority) {
  auto u = parse_url("http://[::1]:8080/metrics");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->authority(), "[::1]:8080");
  EXPECT_EQ(parse_url("http://[fe80::1]")->authority(), "[fe80::1]");
}

TEST(UrlTest, userinfo_is_flagged_dropped_and_never_echoed) {
  auto u = parse_url("http://admin:hunter2@example.com/x");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->has_userinfo);
  EXPECT_EQ(u->host, "example.com");
  EXPECT_FALSE(parse_url("http://example.com/a@b")->has_userinfo)
      << "an @ in the path is not userinfo";
  auto bad = parse_url("http://admin:hunter2@example.com:port/x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kConfig);
  EXPECT_EQ(bad.error().message.find("hunter2"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("***@example.com"), std::string::npos) << bad.error().message;
}

TEST(UrlTest, malformed_urls_are_config_errors_naming_what_is_wrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"example.com", "expected scheme://host"},
      {"ftp://example.com", "scheme must be http or https"},
      {"http:///path", "no host"},
      {"http://h:80x", "port must be a number"},
      {"http://[::1", "unterminated IPv6 literal"},
  };
  for (const auto& [url, why] : cases) {
    auto r = parse_url(url);
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().kind, ErrorKind::kConfig) << url;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace harvest
