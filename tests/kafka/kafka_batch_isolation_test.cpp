// Batch isolation (CON-18) on the real broker: the property
// (tests/fuzz/batch_isolation.hpp) through KafkaSource. One topic of two
// partitions holds a random mix of good and bad records; for each binding
// kind, one consumer group dispatches it one record at a time and another in
// batches at max_in_flight 16. Both must leave the same dead letters, runs
// and signals, and both groups' committed offsets must reach the log end.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "batch_isolation.hpp"
#include "kafka_connector_fixture.hpp"

namespace harvest::kafka::testing {
namespace {

using namespace connector::testing::isolation;

class KafkaBatchIsolation : public KafkaConnectorTest {
 protected:
  Outcome dispatch(bool entity, const std::string& prefix, const std::string& topic,
                   const std::map<int32_t, int64_t>& ends, size_t max_in_flight, size_t max_batch,
                   std::map<std::string, std::string>& details) {
    close_runs(*engine_, db(), prefix);
    const std::string group = unique_name("iso");
    auto source = connect(config(group, topic));
    auto sink = std::make_shared<connector::RecordingDeadLetterSink>();
    connector::ConnectorRuntimeConfig cfg = quick_config();
    cfg.max_batch = max_batch;
    cfg.commit_concurrency = 2;
    auto rt = runtime(fuzz_binding(entity, prefix, max_in_flight, topic), source, cfg, false);
    rt->with_dead_letter_sink(sink);
    auto last_look = std::chrono::steady_clock::now();
    (void)drive(
        *rt,
        [&] {
          // Ask the broker at most every 250 ms.
          if (std::chrono::steady_clock::now() - last_look < 250ms) return false;
          last_look = std::chrono::steady_clock::now();
          return committed(group, topic) == ends;
        },
        prefix, 180s);
    EXPECT_EQ(committed(group, topic), ends) << prefix;
    return read_outcome(db(), prefix, *sink, details);
  }
};

TEST_F(KafkaBatchIsolation, each_record_of_a_mixed_batch_gets_the_outcome_it_gets_alone) {
  const uint64_t seed = fuzz_seed("KafkaBatchIsolation");
  std::mt19937_64 rng(seed);
  std::map<int, size_t> kinds_seen;
  size_t total = 0;
  int config_no = 0;
  for (bool entity : {false, true}) {
    ++config_no;
    SCOPED_TRACE(::testing::Message()
                 << (entity ? "signals_with_start" : "starts") << " seed " << seed);
    const Trial trial = generate(rng, 600 / harvest::testing::kFuzzDivisor, kinds_seen);
    total += trial.messages.size();
    const std::string topic = make_topic(kPartitions);
    std::map<int32_t, int64_t> ends;
    for (size_t i = 0; i < trial.messages.size(); ++i) {
      const int32_t p = static_cast<int32_t>(i % kPartitions);
      auto offset = broker_->produce(topic, Record{.partition = p, .payload = trial.messages[i]});
      ASSERT_TRUE(offset) << offset.error().message;
      ASSERT_EQ(*offset, static_cast<int64_t>(i / kPartitions)) << "round robin, in order";
      ends[p] = *offset + 1;
    }
    const std::string tag = std::to_string(config_no);
    std::map<std::string, std::string> ignored, details;
    Outcome alone = dispatch(entity, "a" + tag + "-", topic, ends, 1, 1, ignored);
    Outcome batched = dispatch(entity, "b" + tag + "-", topic, ends, 16, 64, details);
    expect_same_outcomes(entity, trial, std::move(alone), std::move(batched), details, kPartitions);
  }
  EXPECT_GE(total, 1000u / harvest::testing::kFuzzDivisor);
}

}  // namespace
}  // namespace harvest::kafka::testing
