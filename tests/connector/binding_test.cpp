// CON-2, CON-12: the documented defaults of bindings and the runtime config.
#include <gtest/gtest.h>

#include <harvest/connector/binding.hpp>
#include <harvest/connector/runtime.hpp>

namespace harvest::connector {
namespace {

using namespace std::chrono_literals;

TEST(ConnectorDefaults, runtime_config_matches_the_spec) {
  ConnectorRuntimeConfig c;
  EXPECT_EQ(c.poll_timeout, 1000ms);
  EXPECT_EQ(c.idle_backoff, 200ms);
  EXPECT_EQ(c.lag_sample_interval, 15000ms);
  EXPECT_FALSE(c.stall_threshold) << "derived from max_in_flight unless set";
}

TEST(ConnectorDefaults, binding_options_match_the_spec) {
  auto b = SourceBinding::starts("orders", "orders.placed", "fulfil_order");
  EXPECT_EQ(b.max_in_flight(), 16u);
  EXPECT_EQ(b.poison_threshold(), 3u);
  EXPECT_FALSE(b.uses_broker_native_dead_letter());
  EXPECT_EQ(b.requested_idempotency_mode(), IdempotencyMode::kAuto);
  EXPECT_EQ(b.incarnation(), "");
  EXPECT_FALSE(b.mapper()) << "no mapping until map_json/map_raw";
  auto s = SourceBinding::signals_with_start("t", "s", "w", "reading");
  EXPECT_EQ(s.kind(), BindingKind::kSignalsWithStart);
  EXPECT_EQ(s.signal(), "reading");
}

}  // namespace
}  // namespace harvest::connector
