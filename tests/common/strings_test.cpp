#include <gtest/gtest.h>

#include <harvest/common/strings.hpp>

namespace harvest {
namespace {

TEST(Strings, ascii_lower_touches_only_ascii_letters) {
  EXPECT_EQ(ascii_lower("Host-NAME_9"), "host-name_9");
  EXPECT_EQ(ascii_lower("\xC3\x84"), "\xC3\x84");
}

TEST(Strings, split_list_trims_and_drops_empties) {
  EXPECT_EQ(split_list(" a, b,,c ,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_EQ(split_list("x"), (std::vector<std::string>{"x"}));
}

TEST(Strings, is_timestamp_takes_rfc3339_with_a_real_date_and_time) {
  EXPECT_TRUE(is_timestamp("2026-12-04T06:00:00Z"));
  EXPECT_TRUE(is_timestamp("2026-12-04 06:00:00.5+01:00"));
  EXPECT_TRUE(is_timestamp("2024-02-29t23:59:59.123456-09:30"));
  EXPECT_FALSE(is_timestamp("2026-02-29T00:00:00Z")) << "not a leap year";
  EXPECT_FALSE(is_timestamp("2026-12-04T24:00:00Z"));
  EXPECT_FALSE(is_timestamp("2026-12-04T06:60:00Z"));
  EXPECT_FALSE(is_timestamp("2026-12-04T06:00:00+24:00"));
  EXPECT_FALSE(is_timestamp("2026-12-04T06:00:00"));  // no zone
  EXPECT_FALSE(is_timestamp("2026-12-04T06:00:00.1234567Z"));
  EXPECT_FALSE(is_timestamp(" 2026-12-04T06:00:00Z"));
  EXPECT_FALSE(is_timestamp("2026-12-04T06:00:00Z' OR 1=1"));
  EXPECT_FALSE(is_timestamp("0000-01-01T00:00:00Z"));
  EXPECT_FALSE(is_timestamp(""));
}

}  // namespace
}  // namespace harvest
