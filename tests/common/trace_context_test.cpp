// W3C Trace Context parsing: what is kept, what is ignored.
#include <gtest/gtest.h>

#include <harvest/common/trace_context.hpp>

namespace harvest {
namespace {

constexpr const char* kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContext, a_valid_traceparent_and_tracestate_are_kept) {
  auto t = parse_trace_context(kParent, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->traceparent, kParent);
  EXPECT_EQ(t->tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  EXPECT_EQ(t->trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(trace_context_from_json(to_json(*t)), t);
}

TEST(TraceContext, malformed_traceparents_are_ignored) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // forbidden version
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // v00 has no more
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    // separators
           "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",    // not hex
       }) {
    EXPECT_FALSE(parse_trace_context(bad, std::nullopt)) << bad;
  }
  EXPECT_FALSE(parse_trace_context(std::nullopt, "a=b")) << "a tracestate alone is no context";
  EXPECT_FALSE(parse_trace_context(std::string(300, 'a'), std::nullopt));
}

TEST(TraceContext, a_later_version_may_append_fields) {
  const std::string v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future";
  ASSERT_TRUE(parse_trace_context(v1, std::nullopt));
  EXPECT_FALSE(parse_trace_context(v1.substr(0, 55) + "x", std::nullopt));
}

TEST(TraceContext, an_oversized_or_binary_tracestate_is_dropped_keeping_the_parent) {
  auto big = parse_trace_context(kParent, std::string(kMaxTraceState + 1, 'a'));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->tracestate, std::nullopt);
  auto binary = parse_trace_context(kParent, std::string("a=\x01\xff", 4));
  ASSERT_TRUE(binary);
  EXPECT_EQ(binary->tracestate, std::nullopt);
  auto at_limit = parse_trace_context(kParent, std::string(kMaxTraceState, 'a'));
  ASSERT_TRUE(at_limit);
  EXPECT_EQ(at_limit->tracestate->size(), kMaxTraceState);
}

}  // namespace
}  // namespace harvest
