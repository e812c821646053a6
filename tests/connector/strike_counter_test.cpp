// CON-9: the bounded in-memory strike counter.
#include <gtest/gtest.h>

#include <harvest/common/log.hpp>
#include <harvest/connector/strike_counter.hpp>

namespace harvest::connector {
namespace {

TEST(StrikeCounter, counts_consecutive_strikes_and_resets) {
  StrikeCounter c("orders");
  EXPECT_EQ(c.strike("k"), 1u);
  EXPECT_EQ(c.strike("k"), 2u);
  c.reset("k");
  EXPECT_EQ(c.count("k"), 0u);
  EXPECT_EQ(c.strike("k"), 1u);
}

TEST(StrikeCounter, is_capped_at_10000_and_warns_once_on_evicting_a_live_count) {
  log::LogCapture capture;
  StrikeCounter c("telemetry");
  for (int i = 0; i < 10'000; ++i) c.strike("m" + std::to_string(i));
  EXPECT_EQ(c.size(), 10'000u);
  EXPECT_FALSE(c.eviction_warned());
  EXPECT_EQ(capture.count_containing("strike counter is full"), 0u);
  for (int i = 10'000; i < 10'050; ++i) c.strike("m" + std::to_string(i));
  EXPECT_EQ(c.size(), 10'000u);
  EXPECT_TRUE(c.eviction_warned());
  EXPECT_EQ(capture.count_containing("strike counter is full"), 1u) << "warned exactly once";
  EXPECT_TRUE(capture.contains({"telemetry", "poison_threshold(1)"}));
  EXPECT_EQ(c.count("m0"), 0u) << "the least recently struck entry was evicted";
  EXPECT_EQ(c.count("m10049"), 1u);
}

TEST(StrikeCounter, a_restruck_entry_is_kept_over_older_ones) {
  StrikeCounter c("orders", 3);
  c.strike("a");
  c.strike("b");
  c.strike("c");
  c.strike("a");  // a is now the most recent
  c.strike("d");  // evicts b
  EXPECT_EQ(c.count("a"), 2u);
  EXPECT_EQ(c.count("b"), 0u);
}

}  // namespace
}  // namespace harvest::connector
