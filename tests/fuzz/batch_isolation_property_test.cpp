// Batch isolation (CON-18) as a property. Random mixes of good and bad
// messages — a NUL or invalid UTF-8 in the start input or the signal
// payload, an over-long workflow id, JSON nested past the limit, a mapper
// that throws, a mapper rejection, a workflow id repeated within the batch,
// a signal to an entity run that is closed under the reject policy — go
// through both binding kinds at max_in_flight 1, 16 and 64. Each message's
// outcome must equal the outcome it gets alone: the same messages are first
// dispatched one at a time (max_batch 1, max_in_flight 1), in order, then in
// batches, under two prefixes, and the two runs must leave the same dead
// letters (same message, same reason) and the same runs and signals. Both
// runs' partitions commit to their end, and no pass reports a stall. (An
// unknown workflow cannot be expressed per message: a binding names its
// workflow, and the plugin refuses a binding whose workflow is unknown.)
// Seeded: the seed is printed, and HARVEST_FUZZ_SEED replays it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "batch_isolation.hpp"
#include "connector_fixture.hpp"

namespace harvest::connector::testing {
namespace {

using namespace isolation;

class BatchIsolationProperty : public ConnectorTest {
 protected:
  // Dispatches the trial on a MockSource (round robin over kPartitions)
  // through a fresh runtime until every partition committed its last
  // offset; returns what it left.
  Outcome dispatch(bool entity, const std::string& prefix, size_t max_in_flight, size_t max_batch,
                   const Trial& trial, std::map<std::string, std::string>& details) {
    close_runs(*engine_, db(), prefix);
    auto source = std::make_shared<MockSource>("fuzz");
    std::vector<int64_t> ends(kPartitions, 0);
    for (size_t i = 0; i < trial.messages.size(); ++i) {
      const int p = static_cast<int>(i % kPartitions);
      source->push_kafka(p, ends[p]++, trial.messages[i]);
    }
    auto sink = std::make_shared<RecordingDeadLetterSink>();
    ConnectorRuntimeConfig config;
    config.max_batch = max_batch;
    config.commit_concurrency = 2;
    auto rt = runtime(fuzz_binding(entity, prefix, max_in_flight, "fuzz"), source, config, false);
    rt->with_dead_letter_sink(sink);
    (void)drive(
        *rt,
        [&] {
          for (int p = 0; p < kPartitions; ++p) {
            if (source->committed(p) != ends[p]) return false;
          }
          return true;
        },
        prefix, 120s);
    return read_outcome(db(), prefix, *sink, details);
  }
};

TEST_F(BatchIsolationProperty, each_message_of_a_mixed_batch_gets_the_outcome_it_gets_alone) {
  const uint64_t seed = fuzz_seed("BatchIsolationProperty");
  std::mt19937_64 rng(seed);
  // 6 configurations: 10,200 messages batched (a tenth under the sanitizer).
  constexpr size_t kPerConfig = 1700 / harvest::testing::kFuzzDivisor;
  size_t total = 0;
  std::map<int, size_t> kinds_seen;
  int config_no = 0;
  for (bool entity : {false, true}) {
    for (size_t mif : {size_t{1}, size_t{16}, size_t{64}}) {
      ++config_no;
      SCOPED_TRACE(::testing::Message() << (entity ? "signals_with_start" : "starts")
                                        << " max_in_flight " << mif << " seed " << seed);
      const Trial trial = generate(rng, kPerConfig, kinds_seen);
      total += trial.messages.size();
      const std::string tag = std::to_string(config_no);
      std::map<std::string, std::string> ignored, details;
      Outcome alone = dispatch(entity, "a" + tag + "-", 1, 1, trial, ignored);
      Outcome batched = dispatch(entity, "b" + tag + "-", mif, 64, trial, details);
      expect_same_outcomes(entity, trial, std::move(alone), std::move(batched), details,
                           kPartitions);
    }
  }
  EXPECT_GE(total, 10000u / harvest::testing::kFuzzDivisor);
  EXPECT_EQ(kinds_seen.size(), static_cast<size_t>(kKinds)) << "every kind was drawn";
}

}  // namespace
}  // namespace harvest::connector::testing
