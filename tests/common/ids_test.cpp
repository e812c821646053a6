// common/ids: random and time-ordered UUIDs.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include <harvest/common/ids.hpp>

namespace harvest {
namespace {

TEST(IdsTest, a_time_ordered_uuid_is_version_7_and_sorts_by_creation_time) {
  const std::string a = new_time_ordered_uuid();
  ASSERT_TRUE(is_uuid(a)) << a;
  EXPECT_EQ(a[14], '7') << a;
  EXPECT_NE(std::string("89ab").find(a[19]), std::string::npos) << "RFC 9562 variant: " << a;
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const std::string b = new_time_ordered_uuid();
  EXPECT_LT(a, b) << "a later millisecond sorts later, as text and as uuid";
  std::set<std::string> same_ms;
  for (int i = 0; i < 1000; ++i) same_ms.insert(new_time_ordered_uuid());
  EXPECT_EQ(same_ms.size(), 1000u) << "74 random bits tell apart ids of one millisecond";
}

TEST(IdsTest, a_random_uuid_is_version_4_with_no_time_prefix) {
  const std::string a = new_uuid();
  ASSERT_TRUE(is_uuid(a));
  EXPECT_EQ(a[14], '4');
  EXPECT_NE(a.substr(0, 8), new_uuid().substr(0, 8)) << "prefixes of random ids stay unique";
}

}  // namespace
}  // namespace harvest
