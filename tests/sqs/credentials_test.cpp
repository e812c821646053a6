// SQS-3: the ambient AWS configuration — credentials from the environment, the
// shared credentials/config files with profiles, web identity (STS), the
// container endpoint and IMDSv2 (the HTTP ones against a local fake on
// 127.0.0.1), the region and the endpoint override.
#include <gtest/gtest.h>

#include <atomic>

#include "fake_http_server.hpp"
#include "scoped_env.hpp"
#include <harvest/sqs/aws_config.hpp>
#include <harvest/sqs/credentials.hpp>
#include <harvest/sqs/http_transport.hpp>
#include <harvest/sqs/sqs_client.hpp>

namespace harvest::sqs {
namespace {

using testing::FakeHttpServer;
using testing::IsolatedAwsEnv;

std::string iso8601(std::chrono::system_clock::time_point t) {
  auto secs = std::chrono::floor<std::chrono::seconds>(t);
  auto day = std::chrono::floor<std::chrono::days>(secs);
  std::chrono::year_month_day ymd{day};
  std::chrono::hh_mm_ss hms{secs - day};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02ld:%02ld:%02ldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long>(hms.hours().count()), static_cast<long>(hms.minutes().count()),
                static_cast<long>(hms.seconds().count()));
  return buf;
}

// --- environment and profile files -------------------------------------------

TEST(CredentialChain, environment_keys_and_session_token) {
  IsolatedAwsEnv env;
  env.set("AWS_ACCESS_KEY_ID", "AKIAENV");
  env.set("AWS_SECRET_ACCESS_KEY", "env-secret");
  env.set("AWS_SESSION_TOKEN", "env-token");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIAENV");
  EXPECT_EQ(c->secret_access_key, "env-secret");
  EXPECT_EQ(c->session_token, "env-token");
  EXPECT_EQ(c->source, "environment");
}

TEST(CredentialChain, half_set_environment_is_a_config_error_naming_both_variables) {
  IsolatedAwsEnv env;
  env.set("AWS_ACCESS_KEY_ID", "AKIAENV");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  EXPECT_NE(c.error().message.find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
}

TEST(CredentialChain, environment_wins_over_the_profile) {
  IsolatedAwsEnv env;
  env.write_file(".aws/credentials",
                 "[default]\naws_access_key_id = AKIAFILE\n"
                 "aws_secret_access_key = file-secret\n");
  env.set("AWS_ACCESS_KEY_ID", "AKIAENV");
  env.set("AWS_SECRET_ACCESS_KEY", "env-secret");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIAENV");
}

TEST(CredentialChain, default_profile_from_the_shared_credentials_file_under_home) {
  IsolatedAwsEnv env;
  // HOME/.aws/credentials is the default location.
  env.unset("AWS_SHARED_CREDENTIALS_FILE");
  env.unset("AWS_CONFIG_FILE");
  env.write_file(".aws/credentials",
                 "# a comment\n[default]\naws_access_key_id = AKIADEFAULT\n"
                 "aws_secret_access_key = default/secret#with;chars\n"
                 "aws_session_token = tok ; trailing comment\n");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIADEFAULT");
  EXPECT_EQ(c->secret_access_key, "default/secret#with;chars");
  EXPECT_EQ(c->session_token, "tok");
  EXPECT_EQ(c->source, "profile default");
}

TEST(CredentialChain, aws_profile_selects_a_named_profile_from_either_file) {
  IsolatedAwsEnv env;
  env.write_file(".aws/credentials",
                 "[default]\naws_access_key_id = AKIADEFAULT\n"
                 "aws_secret_access_key = s0\n"
                 "[work]\naws_access_key_id = AKIAWORK\n"
                 "aws_secret_access_key = s1\n");
  env.write_file(".aws/config",
                 "[profile cfgonly]\nregion = eu-west-3\n"
                 "aws_access_key_id = AKIACFG\naws_secret_access_key = s2\n");
  env.set("AWS_PROFILE", "work");
  auto work = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(work) << work.error().message;
  EXPECT_EQ(work->access_key_id, "AKIAWORK");
  EXPECT_EQ(work->source, "profile work");

  env.set("AWS_PROFILE", "cfgonly");
  auto cfg = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->access_key_id, "AKIACFG");
  EXPECT_EQ(resolve_region(), "eu-west-3");
}

TEST(CredentialChain, credentials_file_wins_over_config_file_for_the_same_profile) {
  IsolatedAwsEnv env;
  env.write_file(".aws/config",
                 "[profile both]\naws_access_key_id = AKIACONFIG\n"
                 "aws_secret_access_key = config-secret\nregion = ap-south-1\n");
  env.write_file(".aws/credentials",
                 "[both]\naws_access_key_id = AKIACREDS\n"
                 "aws_secret_access_key = creds-secret\n");
  env.set("AWS_PROFILE", "both");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIACREDS");
  EXPECT_EQ(c->secret_access_key, "creds-secret");
}

TEST(CredentialChain, a_named_profile_that_does_not_exist_is_a_config_error_naming_it) {
  IsolatedAwsEnv env;
  env.write_file(".aws/credentials",
                 "[default]\naws_access_key_id = A\naws_secret_access_key = B\n");
  env.set("AWS_PROFILE", "nosuch");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  EXPECT_NE(c.error().message.find("'nosuch'"), std::string::npos) << c.error().message;
}

TEST(CredentialChain, nothing_configured_is_a_config_error_listing_what_was_tried) {
  IsolatedAwsEnv env;
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  for (const char* needle : {"no AWS credentials found", "AWS_ACCESS_KEY_ID", "profile 'default'",
                             "AWS_WEB_IDENTITY_TOKEN_FILE", "instance metadata"})
    EXPECT_NE(c.error().message.find(needle), std::string::npos) << needle;
}

TEST(SqsAmbientConfig, config_file_sections_comments_and_nested_properties) {
  auto sections = parse_profile_file(
      "[default]\nregion = us-west-1\n"
      "[profile default]\nregion = us-west-2\n"
      "; comment\n# comment\n"
      "[profile dev]\nREGION=eu-north-1\ns3 =\n  max_concurrent_requests = 20\n"
      "output = json # inline\n"
      "[sso-session corp]\nsso_region = us-east-1\n"
      "[services local]\nsqs =\n  endpoint_url = http://x\n",
      ProfileFileKind::kConfig);
  EXPECT_EQ(sections["default"]["region"], "us-west-2");  // [profile default] wins
  EXPECT_EQ(sections["dev"]["region"], "eu-north-1");     // keys are case-insensitive
  EXPECT_EQ(sections["dev"]["output"], "json");
  EXPECT_FALSE(sections["dev"].contains("max_concurrent_requests"));
  EXPECT_FALSE(sections.contains("corp"));
  EXPECT_FALSE(sections.contains("sso-session corp"));
  EXPECT_FALSE(sections.contains("local"));
}

// --- region and endpoint ------------------------------------------------------

TEST(SqsAmbientConfig, region_from_aws_region_then_aws_default_region_then_profile) {
  IsolatedAwsEnv env;
  env.write_file(".aws/config", "[default]\nregion = eu-central-1\n");
  EXPECT_EQ(resolve_region(), "eu-central-1");
  env.set("AWS_DEFAULT_REGION", "us-west-2");
  EXPECT_EQ(resolve_region(), "us-west-2");
  env.set("AWS_REGION", "ap-northeast-1");
  EXPECT_EQ(resolve_region(), "ap-northeast-1");
}

TEST(SqsAmbientConfig, no_region_anywhere_and_the_client_refuses_to_build) {
  IsolatedAwsEnv env;
  EXPECT_EQ(resolve_region(), std::nullopt);
  auto client = SqsClient::create();
  ASSERT_FALSE(client);
  EXPECT_EQ(client.error().kind, ErrorKind::kConfig);
  EXPECT_NE(client.error().message.find("AWS_REGION"), std::string::npos);
}

TEST(SqsAmbientConfig, endpoint_explicit_then_sqs_variable_then_global_variable_then_regional) {
  IsolatedAwsEnv env;
  EXPECT_EQ(resolve_sqs_endpoint(std::nullopt, "eu-west-1"), "https://sqs.eu-west-1.amazonaws.com");
  EXPECT_EQ(resolve_sqs_endpoint(std::nullopt, "cn-north-1"),
            "https://sqs.cn-north-1.amazonaws.com.cn");
  env.set("AWS_ENDPOINT_URL", "http://127.0.0.1:1000");
  EXPECT_EQ(resolve_sqs_endpoint(std::nullopt, "eu-west-1"), "http://127.0.0.1:1000");
  env.set("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:2000");
  EXPECT_EQ(resolve_sqs_endpoint(std::nullopt, "eu-west-1"), "http://127.0.0.1:2000");
  EXPECT_EQ(resolve_sqs_endpoint("http://127.0.0.1:3000", "eu-west-1"), "http://127.0.0.1:3000");
}

TEST(SqsAmbientConfig, client_takes_endpoint_from_environment_and_region_from_an_aws_host) {
  IsolatedAwsEnv env;
  env.set("AWS_ENDPOINT_URL_SQS", "https://sqs.eu-west-2.amazonaws.com");
  auto client = SqsClient::create();
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_EQ((*client)->endpoint(), "https://sqs.eu-west-2.amazonaws.com");
  EXPECT_EQ((*client)->region(), "eu-west-2");

  env.set("AWS_REGION", "us-east-1");
  env.set("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:19324");
  client = SqsClient::create();
  ASSERT_TRUE(client) << client.error().message;
  EXPECT_EQ((*client)->endpoint(), "http://127.0.0.1:19324");
  EXPECT_EQ((*client)->region(), "us-east-1");

  auto bad = SqsClient::create({.endpoint = "ftp://example.com"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::kConfig);
}

// --- container provider -------------------------------------------------------

TEST(CredentialChain, container_full_uri_with_authorization_token) {
  IsolatedAwsEnv env;
  const auto expiry = std::chrono::system_clock::now() + std::chrono::hours(6);
  std::atomic<int> calls{0};
  std::string seen_authorization;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Get("/v2/credentials", [&](const httplib::Request& req, httplib::Response& res) {
      ++calls;
      seen_authorization = req.get_header_value("Authorization");
      res.set_content(R"({"AccessKeyId":"ASIACONTAINER","SecretAccessKey":"c-secret",)"
                      R"("Token":"c-token","Expiration":")" +
                          iso8601(expiry) + R"("})",
                      "application/json");
    });
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.url("/v2/credentials"));
  env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Basic secret-token");
  DefaultCredentialsChain chain;
  auto c = chain.credentials();
  ASSERT_TRUE(c) << c.error().message;
  fake.sync();
  EXPECT_EQ(c->access_key_id, "ASIACONTAINER");
  EXPECT_EQ(c->secret_access_key, "c-secret");
  EXPECT_EQ(c->session_token, "c-token");
  EXPECT_EQ(c->source, "container");
  ASSERT_TRUE(c->expiration);
  EXPECT_EQ(std::chrono::floor<std::chrono::seconds>(*c->expiration),
            std::chrono::floor<std::chrono::seconds>(expiry));
  EXPECT_EQ(seen_authorization, "Basic secret-token");
  // Six hours from expiry: cached, not fetched again.
  ASSERT_TRUE(chain.credentials());
  EXPECT_EQ(calls.load(), 1);
}

TEST(CredentialChain, container_token_file_wins_over_token_variable) {
  IsolatedAwsEnv env;
  std::string seen_authorization;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Get("/creds", [&](const httplib::Request& req, httplib::Response& res) {
      seen_authorization = req.get_header_value("Authorization");
      res.set_content(R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T"})",
                      "application/json");
    });
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.url("/creds"));
  env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "from-variable");
  env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", env.write_file("eks-token", "from-file\n"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  fake.sync();
  EXPECT_EQ(seen_authorization, "from-file");
}

TEST(CredentialChain, credentials_near_expiry_are_refreshed) {
  IsolatedAwsEnv env;
  std::atomic<int> calls{0};
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Get("/creds", [&](const httplib::Request&, httplib::Response& res) {
      int n = ++calls;
      // Expires in 2 minutes: inside the default 5-minute refresh margin.
      res.set_content(R"({"AccessKeyId":"A)" + std::to_string(n) +
                          R"(","SecretAccessKey":"S","Token":"T","Expiration":")" +
                          iso8601(std::chrono::system_clock::now() + std::chrono::minutes(2)) +
                          R"("})",
                      "application/json");
    });
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.url("/creds"));
  DefaultCredentialsChain chain;
  auto first = chain.credentials();
  ASSERT_TRUE(first) << first.error().message;
  auto second = chain.credentials();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(first->access_key_id, "A1");
  EXPECT_EQ(second->access_key_id, "A2");
  EXPECT_EQ(calls.load(), 2);
}

TEST(CredentialChain, container_full_uri_over_plain_http_to_a_remote_host_is_refused) {
  IsolatedAwsEnv env;
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://203.0.113.7/creds");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  EXPECT_NE(c.error().message.find("AWS_CONTAINER_CREDENTIALS_FULL_URI"), std::string::npos);
}

TEST(CredentialChain, container_endpoint_refusing_is_an_error_not_a_fall_through) {
  IsolatedAwsEnv env;
  FakeHttpServer fake([](httplib::Server& s) {
    s.Get("/creds", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("busy", "text/plain");
    });
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake.url("/creds"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kTransient);
  EXPECT_NE(c.error().message.find("HTTP 503"), std::string::npos) << c.error().message;
}

// --- IMDSv2 -------------------------------------------------------------------

TEST(CredentialChain, imds_v2_token_then_role_then_credentials) {
  IsolatedAwsEnv env;
  std::atomic<int> token_puts{0};
  std::string ttl;
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Put("/latest/api/token", [&](const httplib::Request& req, httplib::Response& res) {
      ++token_puts;
      ttl = req.get_header_value("X-aws-ec2-metadata-token-ttl-seconds");
      res.set_content("imds-session-token", "text/plain");
    });
    auto authorised = [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("X-aws-ec2-metadata-token") == "imds-session-token") return true;
      res.status = 401;
      return false;
    };
    s.Get("/latest/meta-data/iam/security-credentials/",
          [=](const httplib::Request& req, httplib::Response& res) {
            if (authorised(req, res)) res.set_content("harvest-role\n", "text/plain");
          });
    s.Get("/latest/meta-data/iam/security-credentials/harvest-role",
          [=](const httplib::Request& req, httplib::Response& res) {
            if (!authorised(req, res)) return;
            res.set_content(R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAIMDS",)"
                            R"("SecretAccessKey":"imds-secret","Token":"imds-token",)"
                            R"("Expiration":"2099-01-01T00:00:00Z"})",
                            "text/plain");
          });
  });
  env.unset("AWS_EC2_METADATA_DISABLED");
  env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url("/"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  fake.sync();
  EXPECT_EQ(c->access_key_id, "ASIAIMDS");
  EXPECT_EQ(c->secret_access_key, "imds-secret");
  EXPECT_EQ(c->session_token, "imds-token");
  EXPECT_EQ(c->source, "instance profile harvest-role");
  EXPECT_EQ(token_puts.load(), 1);
  EXPECT_EQ(ttl, "21600");
}

TEST(CredentialChain, imds_disabled_is_skipped) {
  IsolatedAwsEnv env;
  std::atomic<int> calls{0};
  FakeHttpServer fake([&](httplib::Server& s) {
    s.Put("/latest/api/token", [&](const httplib::Request&, httplib::Response& res) {
      ++calls;
      res.set_content("t", "text/plain");
    });
  });
  env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url());
  env.set("AWS_EC2_METADATA_DISABLED", "true");
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  EXPECT_EQ(calls.load(), 0);
}

TEST(CredentialChain, configured_imds_endpoint_that_does_not_answer_is_transient) {
  IsolatedAwsEnv env;
  std::string closed_url;
  {
    FakeHttpServer gone([](httplib::Server&) {});
    closed_url = gone.url();
  }
  env.unset("AWS_EC2_METADATA_DISABLED");
  env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", closed_url);
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kTransient) << c.error().message;
}

// --- web identity (STS AssumeRoleWithWebIdentity) ------------------------------

TEST(CredentialChain, web_identity_exchanges_the_token_file_through_sts) {
  IsolatedAwsEnv env;
  httplib::Params seen;
  std::string seen_content_type;
  FakeHttpServer sts([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      seen_content_type = req.get_header_value("Content-Type");
      httplib::detail::parse_query_text(req.body, seen);
      res.set_content(
          R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:ns:sa</SubjectFromWebIdentityToken>
    <Credentials>
      <SessionToken>sts-session&amp;token</SessionToken>
      <SecretAccessKey>sts-secret</SecretAccessKey>
      <Expiration>2099-12-31T23:00:00Z</Expiration>
      <AccessKeyId>ASIASTS</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>)",
          "text/xml");
    });
  });
  env.set("AWS_WEB_IDENTITY_TOKEN_FILE", env.write_file("token.jwt", "eyJhbGciOi.jwt+token/x=\n"));
  env.set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/harvest");
  env.set("AWS_ROLE_SESSION_NAME", "harvest-test");
  env.set("AWS_ENDPOINT_URL_STS", sts.url("/"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  sts.sync();
  EXPECT_EQ(c->access_key_id, "ASIASTS");
  EXPECT_EQ(c->secret_access_key, "sts-secret");
  EXPECT_EQ(c->session_token, "sts-session&token");
  ASSERT_TRUE(c->expiration);
  EXPECT_EQ(*c->expiration, *parse_iso8601("2099-12-31T23:00:00Z"));
  EXPECT_EQ(c->source, "web identity arn:aws:iam::123456789012:role/harvest");

  auto param = [&](const char* k) {
    auto it = seen.find(k);
    return it == seen.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(param("Action"), "AssumeRoleWithWebIdentity");
  EXPECT_EQ(param("Version"), "2011-06-15");
  EXPECT_EQ(param("RoleArn"), "arn:aws:iam::123456789012:role/harvest");
  EXPECT_EQ(param("RoleSessionName"), "harvest-test");
  EXPECT_EQ(param("WebIdentityToken"), "eyJhbGciOi.jwt+token/x=");
  EXPECT_EQ(seen_content_type.rfind("application/x-www-form-urlencoded", 0), 0u);
}

TEST(CredentialChain, web_identity_rejection_is_a_config_error_with_the_sts_code) {
  IsolatedAwsEnv env;
  FakeHttpServer sts([](httplib::Server& s) {
    s.Post("/", [](const httplib::Request&, httplib::Response& res) {
      res.status = 400;
      res.set_content(R"(<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>
  <Message>Couldn't retrieve verification key from your identity provider</Message></Error>
</ErrorResponse>)",
                      "text/xml");
    });
  });
  env.set("AWS_WEB_IDENTITY_TOKEN_FILE", env.write_file("token.jwt", "jwt"));
  env.set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/harvest");
  env.set("AWS_ENDPOINT_URL_STS", sts.url("/"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kConfig);
  EXPECT_NE(c.error().message.find("InvalidIdentityToken"), std::string::npos) << c.error().message;
}

TEST(CredentialChain, web_identity_from_the_profile) {
  IsolatedAwsEnv env;
  std::string seen_role;
  FakeHttpServer sts([&](httplib::Server& s) {
    s.Post("/", [&](const httplib::Request& req, httplib::Response& res) {
      httplib::Params p;
      httplib::detail::parse_query_text(req.body, p);
      if (auto it = p.find("RoleArn"); it != p.end()) seen_role = it->second;
      res.set_content(
          "<R><Credentials><AccessKeyId>ASIAP</AccessKeyId><SecretAccessKey>s"
          "</SecretAccessKey><SessionToken>t</SessionToken></Credentials></R>",
          "text/xml");
    });
  });
  env.write_file(".aws/config",
                 "[profile irsa]\nrole_arn = arn:aws:iam::1:role/from-profile\n"
                 "web_identity_token_file = " +
                     env.write_file("t.jwt", "jwt") + "\n");
  env.set("AWS_PROFILE", "irsa");
  env.set("AWS_ENDPOINT_URL_STS", sts.url("/"));
  auto c = DefaultCredentialsChain().credentials();
  ASSERT_TRUE(c) << c.error().message;
  sts.sync();
  EXPECT_EQ(c->access_key_id, "ASIAP");
  EXPECT_EQ(seen_role, "arn:aws:iam::1:role/from-profile");
}

TEST(CredentialChain, expiration_timestamps_parse_utc_fractional_and_offset_forms) {
  using namespace std::chrono;
  auto base = sys_days{year{2015} / August / 30} + hours{12} + minutes{36};
  EXPECT_EQ(parse_iso8601("2015-08-30T12:36:00Z"), base);
  EXPECT_EQ(parse_iso8601("2015-08-30T12:36:00.123Z"), base);
  EXPECT_EQ(parse_iso8601("2015-08-30T14:36:00+02:00"), base);
  EXPECT_EQ(parse_iso8601("yesterday"), std::nullopt);
}

}  // namespace
}  // namespace harvest::sqs
