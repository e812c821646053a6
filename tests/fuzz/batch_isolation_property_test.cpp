// Issue 31 (CON-18): batch isolation as a property. Random mixes of good and
// bad messages — a NUL or invalid UTF-8 in the start input or the signal
// payload, an over-long workflow id, JSON nested past the limit, a mapper
// that throws, a mapper rejection, a workflow id repeated within the batch,
// a signal to an entity run that is closed under the reject policy — go
// through both binding kinds at max_in_flight 1, 16 and 64. Each message's
// outcome must equal the outcome it gets alone: the same messages are first
// dispatched one at a time (max_batch 1, max_in_flight 1), in order, then in
// batches, under two prefixes, and the two runs must leave the same dead
// letters (same message, same reason) and the same runs and signals. Both
// runs' partitions commit to their end, and no pass reports a stall.
// (An unknown workflow cannot be expressed per message: a binding names its
// workflow, and the plugin refuses a binding whose workflow is unknown.)
// Seeded: the seed is printed, and HARVEST_FUZZ_SEED replays it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "connector_fixture.hpp"

namespace harvest::connector::testing {
namespace {

using engine::Json;
using namespace std::chrono_literals;

enum Kind : int {
  kGood,
  kNul,
  kUtf8,
  kLongId,
  kDeep,
  kThrows,
  kRejects,
  kRepeatId,
  kClosedEntity,
  kKinds
};
constexpr int kPartitions = 2;
constexpr int kClosedRuns = 5;

Json deep_json(int levels) {
  Json j = 1;
  for (int d = 0; d < levels; ++d) j = Json::array({j});
  return j;
}

// The binding under a prefix: every workflow id it maps starts with it, so
// two runs over the same messages share a database without meeting.
SourceBinding fuzz_binding(bool entity, const std::string& prefix, size_t max_in_flight) {
  const std::string name = prefix.substr(0, prefix.size() - 1);
  auto b = entity ? SourceBinding::signals_with_start(name, "fuzz", "device_session", "reading")
                  : SourceBinding::starts(name, "fuzz", "device_session");
  b.map_json([prefix, entity](const MessageCtx&, Json m) -> MapResult {
    const int i = m.at("i").get<int>();
    const auto kind = static_cast<Kind>(m.at("k").get<int>());
    const bool in_start = m.value("in_start", false);
    std::string id = prefix + "w-" + std::to_string(i);
    Json payload = {{"i", i}};
    Json start = {{"i", i}};
    Json& target = entity && in_start ? start : payload;
    switch (kind) {
      case kGood:
        break;
      case kNul:
        target["s"] = std::string("a\0b", 3);
        break;
      case kUtf8:
        target["s"] = std::string("\xff\xfe");
        break;
      case kLongId:
        id = prefix + std::string(600, 'x') + std::to_string(i);
        break;
      case kDeep:
        target["s"] = deep_json(200);
        break;
      case kThrows:
        throw std::runtime_error("mapper failed on purpose");
      case kRejects:
        return std::unexpected("rejected on purpose");
      case kRepeatId:
        id = prefix + "w-" + std::to_string(m.at("ref").get<int>());
        break;
      case kClosedEntity:
        id = prefix + "closed-" + std::to_string(i % kClosedRuns);
        break;
      case kKinds:
        break;
    }
    MappedMessage out{.workflow_id = id, .payload = payload};
    if (entity) out.start_input = start;
    return out;
  });
  if (entity) {
    b.start_input_from_mapper();
    b.workflow_id_reuse(engine::WorkflowIdReuse::kReject);
  }
  b.poison_threshold(1);  // a rejection is dead-lettered at once, as alone
  b.max_in_flight(max_in_flight);
  return b;
}

struct Outcome {
  std::map<std::string, std::string> letters;  // coordinates -> reason
  std::vector<std::string> runs;               // "id|input" without the prefix
  std::vector<std::string> signals;            // "id|payload" without the prefix
};

// What only one side holds, for a readable failure.
std::string difference(const std::vector<std::string>& alone,
                       const std::vector<std::string>& batched) {
  std::string out;
  std::vector<std::string> a = alone, b = batched, only_a, only_b;
  std::ranges::sort(a);
  std::ranges::sort(b);
  std::ranges::set_difference(a, b, std::back_inserter(only_a));
  std::ranges::set_difference(b, a, std::back_inserter(only_b));
  for (size_t i = 0; i < only_a.size() && i < 10; ++i) out += "\n  alone only:   " + only_a[i];
  for (size_t i = 0; i < only_b.size() && i < 10; ++i) out += "\n  batched only: " + only_b[i];
  return out;
}

class BatchIsolationProperty : public ConnectorTest {
 protected:
  // Dispatches `messages` through a fresh runtime until every partition has
  // committed its last offset; returns what they left.
  Outcome dispatch(bool entity, const std::string& prefix, size_t max_in_flight, size_t max_batch,
                   const std::vector<std::string>& messages) {
    Outcome out;
    for (int n = 0; n < kClosedRuns; ++n) {
      auto r = engine_->start({.workflow = "device_session",
                               .workflow_id = prefix + "closed-" + std::to_string(n),
                               .input = Json::object()});
      EXPECT_TRUE(r) << r.error().message;
    }
    EXPECT_TRUE(
        db().exec("UPDATE harvest_workflow_executions SET status = 'completed', "
                  "completed_at = now() WHERE starts_with(workflow_id, $1)",
                  {prefix + "closed-"}));
    auto source = std::make_shared<MockSource>("fuzz");
    std::vector<int64_t> ends(kPartitions, 0);
    for (size_t i = 0; i < messages.size(); ++i) {
      const int p = static_cast<int>(i % kPartitions);
      source->push_kafka(p, ends[p]++, messages[i]);
    }
    auto sink = std::make_shared<RecordingDeadLetterSink>();
    ConnectorRuntimeConfig config;
    config.max_batch = max_batch;
    config.commit_concurrency = 2;
    auto rt = runtime(fuzz_binding(entity, prefix, max_in_flight), source, config, false);
    rt->with_dead_letter_sink(sink);
    const auto done = [&] {
      for (int p = 0; p < kPartitions; ++p) {
        if (source->committed(p) != ends[p]) return false;
      }
      return true;
    };
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      auto pass = rt->run_once();
      if (!pass) {
        ADD_FAILURE() << prefix
                      << ": a pass failed (a partition stalled?): " << pass.error().message;
        return out;
      }
    }
    for (int p = 0; p < kPartitions; ++p) {
      EXPECT_EQ(source->committed(p), ends[p]) << prefix << " partition " << p;
    }
    for (const auto& l : sink->letters()) {
      EXPECT_TRUE(out.letters.emplace(l.coordinates, l.reason).second)
          << prefix << ": two dead letters for " << l.coordinates;
      details_[prefix][l.coordinates] = l.detail;
    }
    const std::string strip = std::to_string(prefix.size() + 1);
    auto runs = db().exec("SELECT substr(workflow_id, " + strip +
                              ") || '|' || input::text FROM harvest_workflow_executions WHERE "
                              "starts_with(workflow_id, $1) ORDER BY 1",
                          {prefix});
    EXPECT_TRUE(runs);
    for (int r = 0; runs && r < runs->rows(); ++r) out.runs.push_back(runs->get(r, 0));
    auto signals = db().exec(
        "SELECT substr(e.workflow_id, " + strip +
            ") || '|' || s.payload::text FROM harvest_signals s JOIN harvest_workflow_executions "
            "e ON e.id = s.execution_id WHERE starts_with(e.workflow_id, $1) ORDER BY 1",
        {prefix});
    EXPECT_TRUE(signals);
    for (int r = 0; signals && r < signals->rows(); ++r) out.signals.push_back(signals->get(r, 0));
    return out;
  }

  std::map<std::string, std::map<std::string, std::string>> details_;
};

TEST_F(BatchIsolationProperty, each_message_of_a_mixed_batch_gets_the_outcome_it_gets_alone) {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("HARVEST_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf("BatchIsolationProperty seed=%llu (HARVEST_FUZZ_SEED replays it)\n",
              static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  constexpr size_t kPerConfig = 1700;  // 6 configurations: 10,200 messages batched
  size_t total = 0;
  std::map<int, size_t> kinds_seen;
  int config_no = 0;
  for (bool entity : {false, true}) {
    for (size_t mif : {size_t{1}, size_t{16}, size_t{64}}) {
      ++config_no;
      SCOPED_TRACE(::testing::Message() << (entity ? "signals_with_start" : "starts")
                                        << " max_in_flight " << mif << " seed " << seed);
      std::vector<std::string> messages;
      std::vector<Kind> kinds;
      for (size_t i = 0; i < kPerConfig; ++i) {
        // About half good, the rest spread over the bad kinds.
        Kind k = rng() % 2 == 0 ? kGood : static_cast<Kind>(1 + rng() % (kKinds - 1));
        if (k == kRepeatId && i == 0) k = kGood;
        Json m = {{"i", i}, {"k", static_cast<int>(k)}, {"in_start", rng() % 2 == 0}};
        if (k == kRepeatId) m["ref"] = rng() % i;  // an earlier message's id
        messages.push_back(m.dump());
        kinds.push_back(k);
        ++kinds_seen[k];
      }
      total += messages.size();
      const std::string tag = std::to_string(config_no);
      Outcome alone = dispatch(entity, "a" + tag + "-", 1, 1, messages);
      Outcome batched = dispatch(entity, "b" + tag + "-", mif, 64, messages);
      if (!entity) {
        // A starts binding commits on concurrent lanes and promises no order
        // beyond max_in_flight(1): of two messages naming one workflow id,
        // either may be the one that starts it. Such a run must hold one of
        // their inputs; which one is not compared.
        std::map<std::string, std::set<int>> naming;
        for (size_t i = 0; i < kinds.size(); ++i) {
          const int ref = kinds[i] == kRepeatId ? Json::parse(messages[i]).at("ref").get<int>()
                                                : static_cast<int>(i);
          naming["w-" + std::to_string(ref)].insert(static_cast<int>(i));
        }
        for (Outcome* o : {&alone, &batched}) {
          for (auto& run : o->runs) {
            const auto bar = run.find('|');
            const auto it = naming.find(run.substr(0, bar));
            if (it == naming.end() || it->second.size() < 2) continue;
            const int input = Json::parse(run.substr(bar + 1)).at("i").get<int>();
            EXPECT_TRUE(it->second.contains(input)) << run;
            run = run.substr(0, bar) + "|(one of the messages naming it)";
          }
          std::ranges::sort(o->runs);
        }
      }
      EXPECT_EQ(batched.letters, alone.letters) << "dead letters differ";
      EXPECT_TRUE(batched.runs == alone.runs)
          << "runs differ: " << difference(alone.runs, batched.runs);
      EXPECT_TRUE(batched.signals == alone.signals)
          << "signals differ: " << difference(alone.signals, batched.signals);
      EXPECT_FALSE(batched.letters.empty());
      EXPECT_FALSE(batched.runs.empty());
      // Each dead letter names what was wrong.
      for (const auto& [coordinates, detail] : details_["b" + tag + "-"]) {
        // "fuzz:<partition>:<offset>"
        const size_t first = coordinates.find(':');
        const size_t last = coordinates.rfind(':');
        const int64_t offset = std::stoll(coordinates.substr(last + 1));
        const int partition = std::stoi(coordinates.substr(first + 1, last - first - 1));
        const Kind k = kinds[static_cast<size_t>(offset * kPartitions + partition)];
        const char* needle = k == kNul       ? "NUL"
                             : k == kUtf8    ? "UTF-8"
                             : k == kLongId  ? "workflow_id"
                             : k == kDeep    ? "limit of 128"
                             : k == kThrows  ? "mapper failed on purpose"
                             : k == kRejects ? "rejected on purpose"
                                             : "";
        EXPECT_NE(detail.find(needle), std::string::npos)
            << coordinates << " (kind " << k << "): " << detail;
      }
    }
  }
  EXPECT_GE(total, 10000u);
  EXPECT_EQ(kinds_seen.size(), static_cast<size_t>(kKinds)) << "every kind was drawn";
}

}  // namespace
}  // namespace harvest::connector::testing
