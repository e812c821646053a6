// Every SQLSTATE class maps to a deliberate retry class (an error's kind is its
// retry policy), and no server text reaches the caller-facing message.
#include <gtest/gtest.h>

#include <harvest/store/pg_error.hpp>

namespace harvest::store {
namespace {

struct Case {
  const char* sqlstate;
  RetryClass retry;
  ErrorKind kind;
};

TEST(PgError, every_sqlstate_class_has_its_deliberate_retry_class) {
  const Case cases[] = {
      // 08 connection exception
      {"08000", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"08006", RetryClass::kUnavailable, ErrorKind::kTransient},
      // 25006 read-only transaction: a standby, or a primary fenced for a failover
      {"25006", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"25P02", RetryClass::kPermanent, ErrorKind::kInternal},
      // 40 transaction rollback: serialization failure, deadlock
      {"40001", RetryClass::kTransient, ErrorKind::kTransient},
      {"40P01", RetryClass::kTransient, ErrorKind::kTransient},
      // 53 insufficient resources (disk full, out of memory, too many connections)
      // a full disk fails every write alike: the store is unavailable
      {"53100", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"53200", RetryClass::kTransient, ErrorKind::kTransient},
      {"53300", RetryClass::kTransient, ErrorKind::kTransient},
      // 57 operator intervention: admin/crash shutdown, cannot connect now, cancel
      {"57P01", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"57P02", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"57P03", RetryClass::kUnavailable, ErrorKind::kTransient},
      {"57014", RetryClass::kTransient, ErrorKind::kTransient},
      // 58 system error (I/O)
      {"58030", RetryClass::kTransient, ErrorKind::kTransient},
      // lock not available, object in use
      {"55P03", RetryClass::kTransient, ErrorKind::kTransient},
      {"55006", RetryClass::kTransient, ErrorKind::kTransient},
      // 22 data exception: invalid byte sequence, untranslatable \u0000
      {"22021", RetryClass::kPermanent, ErrorKind::kBadRequest},
      {"22P05", RetryClass::kPermanent, ErrorKind::kBadRequest},
      {"22001", RetryClass::kPermanent, ErrorKind::kBadRequest},
      // 23 integrity: unique violation is a conflict, the rest bad data
      {"23505", RetryClass::kPermanent, ErrorKind::kConflict},
      {"23503", RetryClass::kPermanent, ErrorKind::kBadRequest},
      {"23502", RetryClass::kPermanent, ErrorKind::kBadRequest},
      // 54 program limit: index row too big, statement too complex, stack depth
      {"54000", RetryClass::kPermanent, ErrorKind::kBadRequest},
      {"54001", RetryClass::kPermanent, ErrorKind::kBadRequest},
      // 42 syntax error or access rule violation
      {"42601", RetryClass::kPermanent, ErrorKind::kInternal},
      {"42501", RetryClass::kPermanent, ErrorKind::kInternal},
      {"42P01", RetryClass::kPermanent, ErrorKind::kInternal},
      // anything else: feature not supported, internal error
      {"0A000", RetryClass::kPermanent, ErrorKind::kInternal},
      {"XX000", RetryClass::kPermanent, ErrorKind::kInternal},
  };
  for (const auto& c : cases) {
    Error e = error_for_sqlstate(c.sqlstate, "server words", "query failed");
    EXPECT_EQ(e.retry, c.retry) << c.sqlstate;
    EXPECT_EQ(e.kind, c.kind) << c.sqlstate;
    EXPECT_EQ(should_retry(e),
              c.retry == RetryClass::kTransient || c.retry == RetryClass::kUnavailable)
        << c.sqlstate;
    EXPECT_EQ(is_unavailable(e), c.retry == RetryClass::kUnavailable) << c.sqlstate;
  }
}

TEST(PgError, server_text_and_sqlstate_go_to_the_detail_never_the_message) {
  Error e = error_for_sqlstate(
      "54000", "index row size 8200 exceeds btree version 4 maximum 2704 for index \"x_key\"",
      "query failed");
  EXPECT_EQ(e.message.find("54000"), std::string::npos);
  EXPECT_EQ(e.message.find("index"), std::string::npos);
  EXPECT_NE(e.detail.find("54000"), std::string::npos);
  EXPECT_NE(e.detail.find("x_key"), std::string::npos);
  EXPECT_NE(e.describe().find("x_key"), std::string::npos);
}

TEST(PgError, a_missing_answer_is_the_store_unavailable) {
  Error e = classify_pg_error(nullptr, nullptr, "query failed");
  EXPECT_TRUE(should_retry(e));
  EXPECT_TRUE(is_unavailable(e));
  EXPECT_EQ(e.kind, ErrorKind::kTransient);
}

}  // namespace
}  // namespace harvest::store
