// SQS-3: SigV4 signing, checked against the published AWS Signature Version 4
// test suite (aws-sig-v4-test-suite: credentials AKIDEXAMPLE, 2015-08-30
// 12:36:00 UTC, region us-east-1, service "service"). Expected strings are the
// suite's .creq / .sts / .authz files, verbatim.
#include <gtest/gtest.h>

#include <algorithm>

#include <harvest/sqs/sigv4.hpp>

namespace harvest::sqs {
namespace {

using namespace std::chrono;

const AwsCredentials kSuiteCredentials{
    .access_key_id = "AKIDEXAMPLE",
    .secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};

system_clock::time_point suite_time() {
  return sys_days{year{2015} / August / 30} + hours{12} + minutes{36};
}

SigV4Signature sign(const SigV4Request& request, const AwsCredentials& creds = kSuiteCredentials) {
  return sign_v4(request, creds, "us-east-1", "service", suite_time());
}

std::string header(const SigV4Signature& s, std::string_view name) {
  auto it = std::find_if(s.headers.begin(), s.headers.end(),
                         [&](const auto& h) { return h.first == name; });
  return it == s.headers.end() ? "<absent>" : it->second;
}

TEST(SigV4, amz_date_is_basic_iso8601_utc) {
  EXPECT_EQ(amz_date(suite_time()), "20150830T123600Z");
  EXPECT_EQ(amz_date(sys_days{year{2024} / January / 5} + hours{3} + minutes{4} + seconds{5} +
                     milliseconds{999}),
            "20240105T030405Z");
}

TEST(SigV4, get_vanilla_matches_the_aws_suite) {
  auto s = sign({.method = "GET", .host = "example.amazonaws.com", .path = "/"});
  EXPECT_EQ(s.canonical_request,
            "GET\n"
            "/\n"
            "\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20150830T123600Z\n"
            "20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
  EXPECT_EQ(s.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  // The headers to send carry what was signed.
  EXPECT_EQ(header(s, "Host"), "example.amazonaws.com");
  EXPECT_EQ(header(s, "X-Amz-Date"), "20150830T123600Z");
  EXPECT_EQ(header(s, "Authorization"), s.authorization);
  EXPECT_EQ(header(s, "X-Amz-Security-Token"), "<absent>");
}

TEST(SigV4, post_x_www_form_urlencoded_signs_content_type_and_body) {
  auto s = sign({.method = "POST",
                 .host = "example.amazonaws.com",
                 .path = "/",
                 .headers = {{"Content-Type", "application/x-www-form-urlencoded"}},
                 .payload = "Param1=value1"});
  EXPECT_EQ(s.canonical_request,
            "POST\n"
            "/\n"
            "\n"
            "content-type:application/x-www-form-urlencoded\n"
            "host:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "\n"
            "content-type;host;x-amz-date\n"
            "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20150830T123600Z\n"
            "20150830/us-east-1/service/aws4_request\n"
            "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, "
            "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

TEST(SigV4, session_token_is_sent_and_signed_post_sts_header_before) {
  const std::string token =
      "AQoDYXdzEPT//////////"
      "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwth"
      "Ax7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HF"
      "vlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn"
      "9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
  AwsCredentials creds = kSuiteCredentials;
  creds.session_token = token;
  auto s = sign({.method = "POST", .host = "example.amazonaws.com", .path = "/"}, creds);
  EXPECT_EQ(s.canonical_request,
            "POST\n/\n\nhost:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n"
            "x-amz-security-token:" +
                token +
                "\n\nhost;x-amz-date;x-amz-security-token\n"
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b"
                "855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20150830T123600Z\n"
            "20150830/us-east-1/service/aws4_request\n"
            "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date;x-amz-security-token, "
            "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead");
  EXPECT_EQ(header(s, "X-Amz-Security-Token"), token);
}

TEST(SigV4, query_parameters_are_sorted_get_vanilla_query_order_key_case) {
  auto s = sign({.method = "GET",
                 .host = "example.amazonaws.com",
                 .path = "/",
                 .query = {{"Param2", "value2"}, {"Param1", "value1"}}});
  EXPECT_EQ(s.canonical_request,
            "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0");
  EXPECT_EQ(s.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

TEST(SigV4, normalised_paths_sign_like_the_root_get_relative_and_get_slashes) {
  // normalize-path/get-relative-relative and get-slash: same signature as get-vanilla.
  for (const char* path : {"/example1/example2/../..", "//", "/./"}) {
    auto s = sign({.method = "GET", .host = "example.amazonaws.com", .path = path});
    EXPECT_EQ(s.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        << path;
  }
}

TEST(SigV4, sqs_json_request_signs_target_and_content_type) {
  // The shape SqsClient sends: the JSON protocol headers are signed, so a
  // proxy cannot retarget the operation.
  auto s = sign_v4({.method = "POST",
                    .host = "sqs.eu-west-1.amazonaws.com",
                    .path = "/",
                    .headers = {{"Content-Type", "application/x-amz-json-1.0"},
                                {"X-Amz-Target", "AmazonSQS.ReceiveMessage"}},
                    .payload = R"({"QueueUrl":"q"})"},
                   kSuiteCredentials, "eu-west-1", "sqs", suite_time());
  EXPECT_NE(s.authorization.find("Credential=AKIDEXAMPLE/20150830/eu-west-1/sqs/aws4_request, "
                                 "SignedHeaders=content-type;host;x-amz-date;x-amz-target, "),
            std::string::npos)
      << s.authorization;
  EXPECT_NE(s.canonical_request.find("x-amz-target:AmazonSQS.ReceiveMessage\n"), std::string::npos);
  EXPECT_TRUE(s.canonical_request.ends_with(hex_sha256(R"({"QueueUrl":"q"})")));
}

}  // namespace
}  // namespace harvest::sqs
