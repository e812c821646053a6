// One redaction covers every credential form (hardening: credentials).
#include <gtest/gtest.h>

#include <harvest/common/log.hpp>
#include <harvest/common/redact.hpp>

namespace harvest {
namespace {

TEST(Redact, url_userinfo_password) {
  EXPECT_EQ(redact_secrets("postgresql://harvest:s3cr3t@db:5432/app"),
            "postgresql://harvest:***@db:5432/app");
  EXPECT_EQ(redact_secrets("postgres://u:p%40ss@h/d?sslmode=require"),
            "postgres://u:***@h/d?sslmode=require");
  // No password: nothing to hide.
  EXPECT_EQ(redact_secrets("postgresql://harvest@db/app"), "postgresql://harvest@db/app");
}

TEST(Redact, query_parameters) {
  EXPECT_EQ(redact_secrets("postgresql://db/app?user=u&password=hunter2&sslmode=disable"),
            "postgresql://db/app?user=u&password=***&sslmode=disable");
  EXPECT_EQ(redact_secrets("postgresql://db/app?sslpassword=k3y"),
            "postgresql://db/app?sslpassword=***");
}

TEST(Redact, keyword_conninfo) {
  EXPECT_EQ(redact_secrets("host=db port=5432 user=u password=hunter2 dbname=app"),
            "host=db port=5432 user=u password=*** dbname=app");
  EXPECT_EQ(redact_secrets("host=db password = 'with space' dbname=app"),
            "host=db password = *** dbname=app");
  EXPECT_EQ(redact_secrets("host=db PASSWORD=x"), "host=db PASSWORD=***");
}

TEST(Redact, aws_secrets_and_tokens) {
  EXPECT_EQ(redact_secrets("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG"),
            "aws_secret_access_key = ***");
  EXPECT_EQ(redact_secrets("aws_session_token=FQoGZXIvYXdzE"), "aws_session_token=***");
  EXPECT_EQ(redact_secrets(R"({"SecretAccessKey":"abc","Token":"t"})").find("abc"),
            std::string::npos);
  EXPECT_EQ(redact_secrets("Credential=AKID/20260101/us-east-1/sqs/aws4_request, "
                           "SignedHeaders=host, Signature=deadbeef")
                .find("deadbeef"),
            std::string::npos);
  EXPECT_EQ(redact_secrets("Authorization: Bearer abc.def-123"), "Authorization: Bearer ***");
}

// Every log line passes through the redaction, and a line can quote text
// from a broker or a workflow's error of any length. libstdc++'s std::regex
// recursed once per character of a repeated group, so each of these (a
// credential followed by 1 MiB without a space) overflowed the stack and
// killed the process; the redaction is linear now, and still masks them.
TEST(Redact, a_megabyte_long_credential_is_masked_without_exhausting_the_stack) {
  const std::string mib(1 << 20, 'a');
  EXPECT_EQ(redact_secrets("x password=" + mib + " y"), "x password=*** y");
  EXPECT_EQ(redact_secrets("x password='" + mib + "' y"), "x password=*** y");
  EXPECT_EQ(redact_secrets("postgres://u:" + mib + "@h/d"), "postgres://u:***@h/d");
  EXPECT_EQ(redact_secrets("Authorization: Bearer " + mib), "Authorization: Bearer ***");
  EXPECT_EQ(redact_secrets(mib).size(), mib.size());
  // Bytes that are not UTF-8 are matched as bytes, and kept.
  const std::string binary = "\xff\xfe password=\x80\x81 \xc3";
  EXPECT_EQ(redact_secrets(binary), "\xff\xfe password=*** \xc3");
}

}  // namespace
}  // namespace harvest

namespace harvest {
namespace {

// Secrets in logs: the logger masks secrets in every line, whatever the
// call site quoted.
TEST(Redact, every_log_line_passes_through_redaction) {
  log::LogCapture capture;
  log::warn("cannot reach {}", "host=db.internal user=app password=hunter2 dbname=orders");
  log::error("aws_secret_access_key=AKIAsecretvalue failed");
  EXPECT_FALSE(capture.contains({"hunter2"}));
  EXPECT_FALSE(capture.contains({"AKIAsecretvalue"}));
  EXPECT_TRUE(capture.contains({"host=db.internal", "***"}));
}

}  // namespace
}  // namespace harvest
