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

}  // namespace
}  // namespace harvest
