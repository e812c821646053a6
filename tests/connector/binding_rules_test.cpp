// CON-4: one set of binding rules (idempotency-mode resolution and every
// refusal) shared by ConnectorRuntime and the plugin.
#include <gtest/gtest.h>

#include <harvest/connector/binding_rules.hpp>
#include <harvest/connector/mock_source.hpp>

namespace harvest::connector {
namespace {

engine::WorkflowRegistry workflows() {
  engine::WorkflowRegistry r;
  r.add("plain", [](engine::WorkflowContext&, engine::Json in) { return in; });
  r.add(
      "throttled", [](engine::WorkflowContext&, engine::Json in) { return in; },
      engine::WorkflowOptions{
          .throttle = engine::ThrottlePolicy{.starts = 1, .period = std::chrono::hours(1)}});
  return r;
}

SourceBinding mapped(SourceBinding b) {
  b.map_raw([](const MessageCtx&, std::string_view) -> MapResult { return MappedMessage{}; });
  return b;
}

bool mentions(const std::vector<std::string>& refusals, const std::string& text) {
  for (const auto& r : refusals) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(BindingRules, an_unset_mode_resolves_by_target_and_kind) {
  const auto r = workflows();
  EXPECT_EQ(resolve_idempotency_mode(SourceBinding::starts("a", "s", "plain"), r),
            IdempotencyMode::kBrokerCoordinates);
  EXPECT_EQ(resolve_idempotency_mode(SourceBinding::starts("a", "s", "throttled"), r),
            IdempotencyMode::kWorkflowId)
      << "a deferred start has no execution id to return for a key";
  EXPECT_EQ(resolve_idempotency_mode(SourceBinding::signals_with_start("a", "s", "plain", "sig"), r,
                                     IdempotencyMode::kWorkflowId),
            IdempotencyMode::kBrokerCoordinates)
      << "signals-with-start always dedupes on coordinates";
  EXPECT_EQ(resolve_idempotency_mode(SourceBinding::starts("a", "s", "plain"), r,
                                     IdempotencyMode::kWorkflowId),
            IdempotencyMode::kWorkflowId)
      << "the runtime's argument overrides";
}

TEST(BindingRules, every_refusal_names_the_binding_and_the_fix) {
  const auto r = workflows();
  MockSource source("s");
  EXPECT_TRUE(
      binding_refusals(mapped(SourceBinding::starts("ok", "s", "plain")), r, &source).empty());

  auto forced = mapped(SourceBinding::starts("forced", "s", "throttled"));
  forced.idempotency_mode(IdempotencyMode::kBrokerCoordinates);
  EXPECT_TRUE(mentions(binding_refusals(forced, r, &source),
                       "binding 'forced' forces idempotency_mode(BrokerCoordinates)"));
  EXPECT_TRUE(mentions(binding_refusals(mapped(SourceBinding::starts("direct", "s", "throttled")),
                                        r, &source, IdempotencyMode::kBrokerCoordinates),
                       "binding 'direct' forces idempotency_mode(BrokerCoordinates)"))
      << "a runtime's own mode argument is refused the same way";

  EXPECT_TRUE(
      mentions(binding_refusals(mapped(SourceBinding::starts("nowf", "s", "missing")), r, &source),
               "targets workflow 'missing', which is not registered"));
  EXPECT_TRUE(mentions(binding_refusals(SourceBinding::starts("bare", "s", "plain"), r, &source),
                       "binding 'bare' has no mapping function"));
  auto zero = mapped(SourceBinding::starts("zero", "s", "plain"));
  zero.max_in_flight(0);
  EXPECT_TRUE(mentions(binding_refusals(zero, r, &source), "binding 'zero' has max_in_flight(0)"));
  EXPECT_TRUE(
      mentions(binding_refusals(mapped(SourceBinding::starts("src", "s", "plain")), r, nullptr),
               "binding 'src' has no source"));
  auto native = mapped(SourceBinding::starts("native", "s", "plain"));
  native.broker_native_dead_letter();
  EXPECT_TRUE(mentions(binding_refusals(native, r, &source), "reports no dead-letter destination"));
  auto entity = mapped(SourceBinding::signals_with_start("ent", "s", "plain", "sig"));
  entity.idempotency_mode(IdempotencyMode::kWorkflowId);
  EXPECT_TRUE(
      mentions(binding_refusals(entity, r, &source), "remove idempotency_mode(WorkflowId)"));
}

TEST(BindingRules, a_binding_on_another_stream_than_its_source_is_refused_naming_both) {
  const auto r = workflows();
  MockSource source("orders.shipped");
  auto refusals = binding_refusals(
      mapped(SourceBinding::starts("orders", "orders.placed", "plain")), r, &source);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("stream 'orders.placed' but its source consumes stream "
                             "'orders.shipped'"),
            std::string::npos)
      << refusals[0];
}

// Coordinate collisions: an unknown collision policy and an explicitly
// empty incarnation are refused at build, naming what was wrong; the known
// names resolve.
TEST(BindingRules, an_unknown_collision_policy_or_an_empty_incarnation_is_refused) {
  const auto r = workflows();
  MockSource source("orders.placed");
  auto unknown = mapped(SourceBinding::starts("orders", "orders.placed", "plain"));
  unknown.on_collision("ignore");
  auto refusals = binding_refusals(unknown, r, &source);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("on_collision('ignore')"), std::string::npos) << refusals[0];
  EXPECT_NE(refusals[0].find("'hold'"), std::string::npos) << refusals[0];

  auto empty = mapped(SourceBinding::starts("orders", "orders.placed", "plain"));
  empty.key_incarnation("");
  refusals = binding_refusals(empty, r, &source);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_NE(refusals[0].find("empty key_incarnation"), std::string::npos) << refusals[0];

  for (const auto* name : {"hold", "dead_letter", "dispatch"}) {
    auto known = mapped(SourceBinding::starts("orders", "orders.placed", "plain"));
    known.on_collision(name).key_incarnation("2026-12");
    EXPECT_TRUE(binding_refusals(known, r, &source).empty()) << name;
    EXPECT_EQ(to_string(known.collision_policy()), name);
  }
  EXPECT_EQ(mapped(SourceBinding::starts("o", "s", "plain")).collision_policy(),
            CollisionPolicy::kHold)
      << "hold is the default";
}

}  // namespace
}  // namespace harvest::connector
