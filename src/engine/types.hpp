// Requests, outcomes and configuration of the workflow engine.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/recorder.hpp"

namespace harvest::engine {

using Json = nlohmann::json;
using namespace std::chrono_literals;

// Where a start came from (ENG-9), stored in start_source.
enum class StartSource { kApi, kClient, kBroker, kChild };
[[nodiscard]] std::string_view to_string(StartSource source);

// The reserved prefix of connector-derived idempotency keys (ENG-11).
// Case-sensitive: "CONN:" is an ordinary key.
inline constexpr std::string_view kReservedKeyPrefix = "conn:";

struct StartRequest {
  std::string workflow;
  // Business identity: a start whose workflow_id already names an execution of
  // this workflow returns that execution (ENG-6).
  std::optional<std::string> workflow_id;
  Json input = Json::object();
  // Start idempotency key, claimed for the start idempotency window (ENG-5).
  std::optional<std::string> idempotency_key;
  StartSource source = StartSource::kClient;
  // Free-form provenance, e.g. rendered broker coordinates.
  std::optional<std::string> source_ref;
};

enum class StartOutcomeKind { kStarted, kIdempotentReplay, kDeferred };
[[nodiscard]] std::string_view to_string(StartOutcomeKind kind);

// The success side of a start. Rejections (permanent errors: unknown
// workflow, invalid input, reserved key, key on a deferred-admission
// workflow) and transient failures are the `Error` side of `Result`.
struct StartOutcome {
  StartOutcomeKind kind;
  // Set for Started and IdempotentReplay; empty for Deferred (no execution yet).
  std::optional<std::string> execution_id;
};

struct SignalTarget {
  std::optional<std::string> execution_id;
  // Alternatively: the execution of `workflow` named `workflow_id`.
  std::optional<std::string> workflow;
  std::optional<std::string> workflow_id;
};

struct SignalRequest {
  SignalTarget target;
  std::string name;
  Json payload = Json::object();
  // Unique per target execution (ENG-7): a repeat is a no-op.
  std::optional<std::string> idempotency_key;
};

enum class SignalOutcomeKind { kDelivered, kDuplicate };

struct SignalOutcome {
  SignalOutcomeKind kind;
  std::string execution_id;
};

struct SignalWithStartRequest {
  std::string workflow;
  std::string workflow_id;  // required: the entity identity
  // Input of the run if this call starts it. Default: an empty object.
  Json start_input = Json::object();
  std::string signal;
  Json payload = Json::object();
  std::optional<std::string> idempotency_key;  // the signal's key
  StartSource source = StartSource::kClient;
  std::optional<std::string> source_ref;  // recorded only when this call starts the run
};

struct SignalWithStartOutcome {
  std::string execution_id;
  bool started = false;           // this call created the execution
  bool duplicate_signal = false;  // the signal's key was already staged
};

// Throttle admission (ENG-8): at most `starts` per `period` per workflow
// type; excess starts are deferred and fired by the engine as tokens free.
struct ThrottlePolicy {
  int starts = 1;
  std::chrono::milliseconds period{1000};
};

struct WorkflowOptions {
  // Runs of this type that fail are retried up to this many attempts in all.
  int max_attempts = 3;
  // Delay before the second attempt; doubles for each later one.
  std::chrono::milliseconds retry_backoff{1000};
  std::optional<ThrottlePolicy> throttle;
};

// Retention of terminal runs (ENG-10). Live runs are never purged.
struct RetentionConfig {
  // Terminal runs older than this (since completion) are deleted with their
  // events and signals. Unset: keep forever.
  std::optional<std::chrono::seconds> max_age;
  // Per workflow type overrides of max_age.
  std::map<std::string, std::chrono::seconds> per_workflow;

  RetentionConfig& with_max_age(std::chrono::seconds age) {
    max_age = age;
    return *this;
  }
  RetentionConfig& with_workflow_max_age(std::string workflow, std::chrono::seconds age) {
    per_workflow[std::move(workflow)] = age;
    return *this;
  }
  // The age applying to `workflow`, if any.
  [[nodiscard]] std::optional<std::chrono::seconds> effective_max_age(
      const std::string& workflow) const;
};

enum class DeploymentMode { kEmbedded, kSplit, kDevCluster };

struct EngineConfig {
  // The application's database (embedded mode: harvest tables live here).
  // Default: $HARVEST_DATABASE_URL.
  std::string database_url;
  // A separate harvest database (split/external mode). Default:
  // $HARVEST_HARVEST_DATABASE_URL. Takes precedence over database_url.
  std::string harvest_database_url;
  // "dev" applies pending migrations at open and, with no URL, starts a
  // private cluster. Default: $HARVEST_PROFILE.
  std::string profile;
  size_t pool_size = 16;
  std::chrono::milliseconds pool_acquire_timeout{5000};
  // How long a keyed start owns its key (ENG-5). Default 24 h.
  std::chrono::seconds start_idempotency_window{24h};
  RetentionConfig retention;
  std::shared_ptr<metrics::MetricsRecorder> metrics;
};

struct HistoryEvent {
  long long id;
  std::optional<int> op_seq;
  std::string kind;
  std::optional<std::string> name;
  Json payload;
};

struct ExecutionView {
  std::string id;
  std::string workflow_name;
  std::optional<std::string> workflow_id;
  std::string status;
  Json input;
  Json output;  // null until completed
  std::optional<std::string> error;
  std::string start_source;
  std::optional<std::string> start_source_ref;
  int attempt = 1;
  std::vector<HistoryEvent> history;
};

}  // namespace harvest::engine
