// Shared by the batch-isolation property tests (CON-18): on MockSource
// (tests/fuzz/batch_isolation_property_test.cpp) and on the real Kafka
// broker (tests/kafka/kafka_batch_isolation_test.cpp). A trial is a random
// mix of good and bad messages; it is dispatched twice under two prefixes —
// one message at a time, in order ("alone"), and in batches — and the two
// must leave the same dead letters, runs and signals.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <harvest/connector/binding.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/runtime.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::connector::testing::isolation {

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

inline Json deep_json(int levels) {
  Json j = 1;
  for (int d = 0; d < levels; ++d) j = Json::array({j});
  return j;
}

// The binding under a prefix: every workflow id it maps starts with it, so
// two runs over the same messages share a database without meeting.
inline SourceBinding fuzz_binding(bool entity, const std::string& prefix, size_t max_in_flight,
                                  const std::string& stream) {
  const std::string name = prefix.substr(0, prefix.size() - 1);
  auto b = entity ? SourceBinding::signals_with_start(name, stream, "device_session", "reading")
                  : SourceBinding::starts(name, stream, "device_session");
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
inline std::string difference(const std::vector<std::string>& alone,
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

// The seed of a run: HARVEST_FUZZ_SEED when set (to replay a failure), else
// a fresh one; printed under `test`'s name either way.
inline uint64_t fuzz_seed(const char* test) {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("HARVEST_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf("%s seed=%llu (HARVEST_FUZZ_SEED replays it)\n", test,
              static_cast<unsigned long long>(seed));
  return seed;
}

// A trial: the messages (JSON bodies) and the kind drawn for each.
struct Trial {
  std::vector<std::string> messages;
  std::vector<Kind> kinds;
};

// About half good, the rest spread over the bad kinds; a repeat names the
// workflow id of an earlier message of its own partition (message i goes to
// partition i % kPartitions). Messages naming one id then share a partition,
// whose order the broker keeps; across partitions it keeps none (a real
// consumer interleaves them as it likes), so no outcome may depend on it.
inline Trial generate(std::mt19937_64& rng, size_t n, std::map<int, size_t>& kinds_seen) {
  Trial t;
  for (size_t i = 0; i < n; ++i) {
    Kind k = rng() % 2 == 0 ? kGood : static_cast<Kind>(1 + rng() % (kKinds - 1));
    if (k == kRepeatId && i < static_cast<size_t>(kPartitions)) k = kGood;
    Json m = {{"i", i}, {"k", static_cast<int>(k)}, {"in_start", rng() % 2 == 0}};
    if (k == kRepeatId) {
      const size_t earlier = i / kPartitions;  // same-partition messages before i
      m["ref"] = i - kPartitions * (1 + rng() % earlier);
    }
    t.messages.push_back(m.dump());
    t.kinds.push_back(k);
    ++kinds_seen[k];
  }
  return t;
}

// The closed entity runs a trial's kClosedEntity messages target, per prefix.
inline void close_runs(engine::Engine& engine, store::Connection& db, const std::string& prefix) {
  for (int n = 0; n < kClosedRuns; ++n) {
    auto r = engine.start({.workflow = "device_session",
                           .workflow_id = prefix + "closed-" + std::to_string(n),
                           .input = Json::object()});
    EXPECT_TRUE(r) << r.error().message;
  }
  EXPECT_TRUE(
      db.exec("UPDATE harvest_workflow_executions SET status = 'completed', "
              "completed_at = now() WHERE starts_with(workflow_id, $1)",
              {prefix + "closed-"}));
}

// Passes until `done`; a pass that fails (a stall) fails the test.
inline bool drive(ConnectorRuntime& rt, const std::function<bool()>& done,
                  const std::string& prefix, std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << prefix << ": not every partition committed to its end in time";
      return false;
    }
    auto pass = rt.run_once();
    if (!pass) {
      ADD_FAILURE() << prefix << ": a pass failed (a partition stalled?): " << pass.error().message;
      return false;
    }
  }
  return true;
}

// What a dispatch under `prefix` left: its dead letters (details into
// `details`), runs and signals, with the prefix stripped.
inline Outcome read_outcome(store::Connection& db, const std::string& prefix,
                            const RecordingDeadLetterSink& sink,
                            std::map<std::string, std::string>& details) {
  Outcome out;
  for (const auto& l : sink.letters()) {
    EXPECT_TRUE(out.letters.emplace(l.coordinates, l.reason).second)
        << prefix << ": two dead letters for " << l.coordinates;
    details[l.coordinates] = l.detail;
  }
  const std::string strip = std::to_string(prefix.size() + 1);
  auto runs = db.exec("SELECT substr(workflow_id, " + strip +
                          ") || '|' || input::text FROM harvest_workflow_executions WHERE "
                          "starts_with(workflow_id, $1) ORDER BY 1",
                      {prefix});
  EXPECT_TRUE(runs);
  for (int r = 0; runs && r < runs->rows(); ++r) out.runs.push_back(runs->get(r, 0));
  auto signals = db.exec("SELECT substr(e.workflow_id, " + strip +
                             ") || '|' || s.payload::text FROM harvest_signals s JOIN "
                             "harvest_workflow_executions e ON e.id = s.execution_id WHERE "
                             "starts_with(e.workflow_id, $1) ORDER BY 1",
                         {prefix});
  EXPECT_TRUE(signals);
  for (int r = 0; signals && r < signals->rows(); ++r) out.signals.push_back(signals->get(r, 0));
  return out;
}

// The property: the batched dispatch left what the one-at-a-time dispatch
// left, and each dead letter names what was wrong. `partitions`: messages
// went round robin, message i to partition i % partitions; dead letters are
// keyed "<stream>:<partition>:<offset>".
inline void expect_same_outcomes(bool entity, const Trial& trial, Outcome alone, Outcome batched,
                                 const std::map<std::string, std::string>& batched_details,
                                 int partitions) {
  if (!entity) {
    // A starts binding commits on concurrent lanes and promises no order
    // beyond max_in_flight(1): of two messages naming one workflow id,
    // either may be the one that starts it. Such a run must hold one of
    // their inputs; which one is not compared.
    std::map<std::string, std::set<int>> naming;
    for (size_t i = 0; i < trial.kinds.size(); ++i) {
      const int ref = trial.kinds[i] == kRepeatId
                          ? Json::parse(trial.messages[i]).at("ref").get<int>()
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
  for (const auto& [coordinates, detail] : batched_details) {
    // "<stream>:<partition>:<offset>"
    const size_t last = coordinates.rfind(':');
    const size_t middle = coordinates.rfind(':', last - 1);
    const int64_t offset = std::stoll(coordinates.substr(last + 1));
    const int partition = std::stoi(coordinates.substr(middle + 1, last - middle - 1));
    const Kind k = trial.kinds[static_cast<size_t>(offset * partitions + partition)];
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

}  // namespace harvest::connector::testing::isolation
