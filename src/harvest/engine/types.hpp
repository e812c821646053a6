// Requests, outcomes and configuration of the workflow engine.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/common/trace_context.hpp>
#include <harvest/metrics/recorder.hpp>

namespace harvest::engine {

using Json = nlohmann::json;

/// Where a start came from (ENG-9), stored in start_source.
enum class StartSource { kApi, kClient, kBroker, kChild };
[[nodiscard]] std::string_view to_string(StartSource source);

/// The reserved prefix of connector-derived idempotency keys (ENG-11).
/// Case-sensitive: "CONN:" is an ordinary key.
inline constexpr std::string_view kReservedKeyPrefix = "conn:";

/// A request to start one run of a registered workflow (`Engine::start`, ENG-4).
/// A plain value; the engine only reads it.
struct StartRequest {
  /// Registered name of the workflow to run; kNotFound when none has it.
  std::string workflow;
  /// Business identity: a start whose workflow_id already names an execution of
  /// this workflow returns that execution (ENG-6).
  std::optional<std::string> workflow_id;
  /// The run's input: must deserialise to the workflow's input type
  /// (kInvalidInput) and hold no U+0000. On a batched workflow, one item of the
  /// batch. Default: an empty object.
  Json input = Json::object();
  /// Start idempotency key, claimed for the start idempotency window (ENG-5).
  std::optional<std::string> idempotency_key;
  /// Where the start came from, stored as the run's start_source. Default kClient.
  StartSource source = StartSource::kClient;
  /// Free-form provenance, e.g. rendered broker coordinates.
  std::optional<std::string> source_ref;
  /// The producer's W3C trace context, kept with the provenance when this
  /// call creates the run (see common/trace_context.hpp).
  std::optional<TraceContext> trace;
};

enum class StartOutcomeKind { kStarted, kIdempotentReplay, kDeferred };
[[nodiscard]] std::string_view to_string(StartOutcomeKind kind);

/// The success side of a start. Rejections (permanent errors: unknown
/// workflow, invalid input, reserved key, key on a deferred-admission
/// workflow) and transient failures are the `Error` side of `Result`.
struct StartOutcome {
  /// kStarted: this call created the run; kIdempotentReplay: an earlier start
  /// with the same key or workflow_id owns it; kDeferred: an admission policy
  /// queued the start.
  StartOutcomeKind kind;
  /// Set for Started and IdempotentReplay; empty for Deferred (no execution yet).
  std::optional<std::string> execution_id;
};

/// The run a signal is for: by execution id, or by workflow name and
/// workflow_id (the id's current run). Neither: kBadRequest.
struct SignalTarget {
  /// The execution to signal; when set, the other fields are ignored.
  std::optional<std::string> execution_id;
  /// Alternatively: the execution of `workflow` named `workflow_id`.
  std::optional<std::string> workflow;
  std::optional<std::string> workflow_id;  ///< with `workflow`: the business identity
};

/// A signal for an existing run (`Engine::signal`, ENG-7): staged in the
/// database and received by the run's `wait_signal(name)`, in staging order.
/// kNotFound when the target does not exist, kConflict when it has closed.
struct SignalRequest {
  SignalTarget target;  ///< the run to signal
  std::string name;     ///< what `wait_signal` waits for; 1 to 200 bytes
  /// Delivered to the run as the result of `wait_signal`; no U+0000.
  /// Default: an empty object.
  Json payload = Json::object();
  /// Unique per target execution (ENG-7): a repeat is a no-op.
  std::optional<std::string> idempotency_key;
};

enum class SignalOutcomeKind { kDelivered, kDuplicate };

/// The success side of a signal.
struct SignalOutcome {
  /// kDelivered: staged now; kDuplicate: its idempotency key was already
  /// staged for this run, so nothing was written.
  SignalOutcomeKind kind;
  std::string execution_id;  ///< the run the signal is for
};

/// The statuses of a run that has ended (ENG-12, ENG-17): completed, failed,
/// cancelled, terminated. A closed run is never claimed again; a failed one
/// may be replayed from the engine's dead letters.
[[nodiscard]] bool is_closed_status(std::string_view status);

/// What signal-with-start does when the workflow id's current run has closed
/// (completed, failed, cancelled or terminated).
enum class WorkflowIdReuse {
  /// A new run of the same workflow id starts (run number + 1) and gets the
  /// signal; the closed run stays readable by its execution id. Default.
  kAllowAfterClose,
  /// The signal is refused (kConflict: the run accepts no more signals).
  kReject,
};

/// Signal-with-start (ENG-7): signals the run `workflow_id` names, starting it
/// first when there is none, in one transaction. A plain value; the engine
/// only reads it.
struct SignalWithStartRequest {
  std::string workflow;     ///< registered workflow name; kNotFound when unknown
  std::string workflow_id;  ///< required: the entity identity
  /// Input of the run if this call starts it. Default: an empty object.
  Json start_input = Json::object();
  std::string signal;                          ///< the signal's name, as for SignalRequest::name
  Json payload = Json::object();               ///< the signal's payload. Default: an empty object.
  std::optional<std::string> idempotency_key;  ///< the signal's key
  StartSource source = StartSource::kClient;   ///< recorded only when this call starts the run
  std::optional<std::string> source_ref;       ///< recorded only when this call starts the run
  std::optional<TraceContext> trace;           ///< likewise
  /// What to do when the workflow id's current run has closed.
  WorkflowIdReuse reuse = WorkflowIdReuse::kAllowAfterClose;
};

/// The success side of a signal-with-start.
struct SignalWithStartOutcome {
  std::string execution_id;       ///< the run that got (or already had) the signal
  bool started = false;           ///< this call created the execution
  bool duplicate_signal = false;  ///< the signal's key was already staged (on any run)
  int run_no = 1;                 ///< which run of the workflow id got the signal
};

/// Throttle admission (ENG-8): at most `starts` per `period` per workflow
/// type; excess starts are deferred and fired by the engine as tokens free.
struct ThrottlePolicy {
  int starts = 1;  ///< runs started per window. Default 1.
  /// Length of a window; the count resets when it has elapsed. Default 1 s.
  std::chrono::milliseconds period{1000};
};

/// Debounce admission (ENG-8): starts of one workflow_id arriving within
/// `window` of each other collapse into one run, fired `window` after the last
/// of them, with the last input. Each fired run's workflow_id is
/// "<workflow_id>#<n>" (n counts the runs fired for that id).
struct DebouncePolicy {
  /// Quiet time after the last start before the run fires. A start without a
  /// workflow_id is refused (kBadRequest). Default 1 s.
  std::chrono::milliseconds window{1000};
};

/// Batch admission (ENG-8): admissions are collected and started as one run
/// whose input is the JSON array of their inputs, once `max_size` are waiting
/// or the oldest has waited `max_wait`. The workflow's input type is therefore
/// an array (e.g. std::vector<Item>).
struct BatchPolicy {
  size_t max_size = 100;  ///< admissions per run; a full batch fires at once. Default 100.
  /// Longest wait of the oldest admission before a partial batch fires.
  /// Default 1 s.
  std::chrono::milliseconds max_wait{1000};
};

/// Per-key concurrency (ENG-19): at most `max_per_key` runs of a workflow
/// type with the same concurrency key execute at once, across every worker of
/// a shard; the others wait runnable and are claimed as runs of their key
/// finish. The key is computed once, when the run is created, from its input
/// and workflow id; a key function that throws refuses the start (a 4xx, or a
/// dead letter naming the cause on a broker). A key is 1 to 512 bytes of
/// UTF-8 without NUL.
struct ConcurrencyPolicy {
  /// Computes a run's concurrency key from its input and workflow id. Called
  /// on the starting thread, possibly from several at once.
  std::function<std::string(const Json& input, const std::optional<std::string>& workflow_id)> key;
  int max_per_key = 1;  ///< runs of one key executing at once; below 1 means 1. Default 1.
};

/// How runs of one workflow type are retried and admitted, given to
/// `WorkflowRegistry::add`. The defaults: 3 attempts, 1 s first backoff, no
/// admission policy, no per-key limit.
struct WorkflowOptions {
  /// Runs of this type that fail are retried up to this many attempts in all;
  /// a run that exhausts them lands in the engine's dead letters (ENG-14).
  int max_attempts = 3;
  /// Delay before the second attempt; doubles for each later one.
  std::chrono::milliseconds retry_backoff{1000};
  /// Admission policies; a start with an idempotency key is refused on a
  /// workflow with any of them (they defer the start: no id to return).
  std::optional<ThrottlePolicy> throttle;
  std::optional<DebouncePolicy> debounce;  ///< see DebouncePolicy
  std::optional<BatchPolicy> batch;        ///< see BatchPolicy
  /// ENG-18: a run whose lease was taken over this many times since it last
  /// recorded a durable operation (its workers crashed, were OOM-killed or
  /// lost their lease at the same point) fails with reason `crashed_worker`
  /// into the engine's dead letters instead of taking down the next worker
  /// too. A takeover from a holder that recorded a step, timer or signal
  /// since the previous takeover starts the count again at 1, as do a
  /// suspension, a retry and a replay: a long run that makes progress
  /// survives any number of node restarts. 0 disables the check.
  int poison_pill_threshold = 3;
  /// Per-key concurrency; unset: runs are claimed without looking at keys.
  std::optional<ConcurrencyPolicy> concurrency;

  /// Whether an admission policy is set (starts may then be deferred).
  [[nodiscard]] bool defers_admission() const { return throttle || debounce || batch; }
};

/// Retention of terminal runs (ENG-10). Live runs are never purged.
struct RetentionConfig {
  /// Terminal runs older than this (since completion) are deleted with their
  /// events and signals; a run that still holds its start's idempotency key
  /// is kept until the key's window lapses (the start idempotency window).
  /// Unset: keep forever.
  std::optional<std::chrono::seconds> max_age;
  /// Per workflow type overrides of max_age.
  std::map<std::string, std::chrono::seconds> per_workflow;

  /// Sets max_age; returns `*this` for chaining.
  RetentionConfig& with_max_age(std::chrono::seconds age) {
    max_age = age;
    return *this;
  }
  /// Sets the max_age of `workflow` alone; returns `*this` for chaining.
  RetentionConfig& with_workflow_max_age(std::string workflow, std::chrono::seconds age) {
    per_workflow[std::move(workflow)] = age;
    return *this;
  }
  /// The age applying to `workflow`, if any.
  [[nodiscard]] std::optional<std::chrono::seconds> effective_max_age(
      const std::string& workflow) const;
};

enum class DeploymentMode { kEmbedded, kSplit, kDevCluster };

/// What `Engine::open` does about the schema and a missing database URL
/// (EngineConfig::profile). Spelled "dev", "test", "prod" in HARVEST_PROFILE.
enum class Profile {
  /// Pending migrations are applied at open and, with no database URL, a
  /// private local PostgreSQL cluster is started (in $HARVEST_DATA_DIR, else
  /// ./.harvest/pg).
  kDev,
  /// As kProd; names a test process.
  kTest,
  /// Pending migrations are not applied: each is a warning at open, for
  /// `harvest migrate`. A database URL is required.
  kProd,
};
/// "dev", "test" or "prod".
[[nodiscard]] std::string_view to_string(Profile profile);
/// The Profile spelled `value` (as to_string spells it). Errors: kConfig
/// naming the value, HARVEST_PROFILE and the allowed spellings.
[[nodiscard]] Result<Profile> parse_profile(std::string_view value);

/// How the shards are reached (EngineConfig::pooler). Spelled "none",
/// "transaction" in HARVEST_DATABASE_POOLER.
enum class Pooler {
  /// Directly, or through a pooler in session mode (each connection keeps
  /// its server session).
  kNone,
  /// Through a pooler in transaction mode (PgBouncer `pool_mode =
  /// transaction`, RDS Proxy), which may run each transaction on another
  /// server session: harvest then keeps nothing on a session — no named
  /// prepared statements, no session settings, no session locks — and
  /// LISTENs only on EngineConfig::listen_urls.
  kTransaction,
};
/// "none" or "transaction".
[[nodiscard]] std::string_view to_string(Pooler pooler);
/// The Pooler spelled `value` (as to_string spells it). Errors: kConfig
/// naming the value, HARVEST_DATABASE_POOLER and the allowed spellings.
[[nodiscard]] Result<Pooler> parse_pooler(std::string_view value);

/// How `Engine::open` finds and uses its databases. A plain value the engine
/// copies; fields left empty (or unset) fall back to the environment
/// variables named, read once at open.
struct EngineConfig {
  /// The application's database (embedded mode: harvest tables live here).
  /// Default: $HARVEST_DATABASE_URL.
  std::string database_url;
  /// A separate harvest database (split/external mode). Default:
  /// $HARVEST_HARVEST_DATABASE_URL. Takes precedence over database_url.
  std::string harvest_database_url;
  /// Whether open applies pending migrations and may start a private cluster
  /// (see Profile). Unset: $HARVEST_PROFILE, parsed by parse_profile (another
  /// value fails open with kConfig), and kProd when that is unset or empty.
  std::optional<Profile> profile;
  /// Extra shards (ENG-15): when set, these URLs are the shards, in order, and
  /// the URLs above are ignored. Default: $HARVEST_SHARD_URLS (comma-separated).
  std::vector<std::string> shard_urls;
  /// How the shards are reached (see Pooler). Unset:
  /// $HARVEST_DATABASE_POOLER, parsed by parse_pooler (another value fails
  /// open with kConfig), and kNone when that is unset or empty.
  std::optional<Pooler> pooler;
  /// Direct URLs (not through the pooler), one per shard in shard order, on
  /// which workers LISTEN for other processes' starts when `pooler` is
  /// kTransaction (LISTEN does not survive transaction pooling). Empty:
  /// idle workers find such starts by polling (WorkerConfig::poll_interval).
  /// Ignored without a transaction pooler, where the shard URLs are used.
  /// Default: $HARVEST_LISTEN_URLS (comma-separated).
  std::vector<std::string> listen_urls;
  /// Connections per shard.
  size_t pool_size = 16;
  /// Longest wait for a free connection before a call fails with a transient
  /// "pool exhausted" error. Default 5 s.
  std::chrono::milliseconds pool_acquire_timeout{5000};
  /// How long a keyed start owns its key (ENG-5). Default 24 h.
  std::chrono::seconds start_idempotency_window{std::chrono::hours(24)};
  RetentionConfig retention;  ///< purge of terminal runs. Default: keep forever.
  /// Where engine and worker metrics go; shared, called from many threads.
  /// Unset: metrics are dropped.
  std::shared_ptr<metrics::MetricsRecorder> metrics;
  /// A stable name for this process, unique among the live ones (e.g. a pod
  /// name). With one, a restarted process takes its own runs back at once
  /// instead of waiting for their leases to lapse, and Kafka sources join
  /// with static membership. Default: $HARVEST_INSTANCE_ID; empty: none.
  std::string instance_id;
  /// Whether starts NOTIFY workers of other processes (channel harvest_work)
  /// as they commit. In-process workers are woken either way. Default true.
  bool notify_other_processes = true;
};

/// One entry of a run's recorded history, as `Engine::get_execution` returns it.
struct HistoryEvent {
  /// Database id; history is ordered by it. 0 for the WorkflowStarted a start
  /// implies: the execution row is the start, no event row is written. The
  /// WorkflowCompleted a completion implies (no event row either) comes last,
  /// one above the run's last event id.
  long long id;
  /// Position of the durable operation in call order; unset for lifecycle
  /// events (WorkflowStarted, AttemptFailed, CancelRequested, ...).
  std::optional<int> op_seq;
  std::string kind;                 ///< e.g. "StepCompleted", "SignalReceived", "WorkflowCompleted"
  std::optional<std::string> name;  ///< the step, signal, lock or child workflow name
  Json payload;                     ///< the recorded result or details; null when none
  /// When the event was recorded (ISO 8601, UTC); for the implied
  /// WorkflowStarted, when the run was created; for the implied
  /// WorkflowCompleted, when it completed.
  std::optional<std::string> recorded_at;
};

/// A signal delivered to a run and not yet consumed by it.
struct UnreadSignal {
  long long id = 0;         ///< delivery order
  std::string name;         ///< the signal name
  Json payload;             ///< what the sender sent
  std::string received_at;  ///< ISO 8601, UTC
};

/// One run with its full history (`Engine::get_execution`, ENG-12).
struct ExecutionView {
  std::string id;                          ///< the execution id (a UUID)
  std::string workflow_name;               ///< the registered workflow
  std::optional<std::string> workflow_id;  ///< business identity, when started with one
  /// Which run of the workflow id this is (entities may have several, one
  /// after another; only the newest is current).
  int run_no = 1;
  bool current = true;  ///< false once a newer run of the workflow id exists
  /// pending, running, waiting, completed, failed, cancelled or terminated.
  std::string status;
  Json input;                                   ///< the input the run was started with
  Json output;                                  ///< null until completed
  std::optional<std::string> error;             ///< the latest failure recorded, if any
  std::string start_source;                     ///< to_string(StartSource): "api", "client", ...
  std::optional<std::string> start_source_ref;  ///< StartRequest::source_ref
  std::optional<TraceContext> start_trace;  ///< the producer's trace, when the start carried one
  int attempt = 1;                          ///< the current attempt, from 1; a retry adds one
  std::vector<HistoryEvent> history;        ///< every recorded event, oldest first
  std::optional<std::string> lease_owner;   ///< the worker holding the run, while one does
  std::optional<std::string> lease_expires_at;  ///< ISO 8601, UTC; with lease_owner
  std::string created_at;                       ///< ISO 8601, UTC
  std::optional<std::string> completed_at;      ///< ISO 8601, UTC; unset while open
  /// The workflow id's runs (entities carry unread signals into a next run):
  /// how many there are, and this run's neighbours by run number.
  int runs = 1;
  std::optional<std::string> previous_run;  ///< the run before this one, if any
  std::optional<std::string> next_run;      ///< the run after this one, if any
  /// Signals delivered and not yet read, oldest first (at most 100).
  std::vector<UnreadSignal> unread_signals;
};

/// Listing executions (newest first), with filters and cursor paging.
/// Unset filters match everything; values are compared exactly.
struct ExecutionFilter {
  std::optional<std::string> workflow;      ///< workflow name
  std::optional<std::string> status;        ///< as in ExecutionView::status
  std::optional<std::string> start_source;  ///< as in ExecutionView::start_source
  std::optional<std::string> workflow_id;   ///< business identity, exactly
  /// Business identities starting with this text (a literal prefix: `%` and
  /// `_` match themselves).
  std::optional<std::string> workflow_id_prefix;
  /// Provenance, exactly: broker coordinates such as `topic:partition:offset`
  /// or an SQS message id (ExecutionView::start_source_ref).
  std::optional<std::string> start_source_ref;
  /// Created at or after `since` and before `until` (ISO 8601 timestamps).
  std::optional<std::string> since;
  std::optional<std::string> until;  ///< see since
  size_t limit = 50;                 ///< capped at 500
  /// The `next_cursor` of the previous page.
  std::optional<std::string> cursor;
};

/// One run in a listing: ExecutionView without input, output and history.
struct ExecutionSummary {
  std::string id;                               ///< the execution id
  std::string workflow_name;                    ///< the registered workflow
  std::optional<std::string> workflow_id;       ///< business identity, if any
  std::string status;                           ///< as in ExecutionView::status
  std::string start_source;                     ///< as in ExecutionView::start_source
  std::optional<std::string> start_source_ref;  ///< provenance, if recorded
  int attempt = 1;                              ///< the current attempt, from 1
  std::string created_at;                       ///< ISO 8601, UTC
  std::optional<std::string> completed_at;      ///< ISO 8601, UTC; unset while open
  int shard = 0;                                ///< index of the shard holding the run (ENG-15)
};

/// How many runs there are by workflow and status, and how many started and
/// closed over a recent window (`Engine::overview`).
struct RunOverview {
  /// How many runs of one workflow are in one status.
  struct Count {
    std::string workflow;  ///< workflow name
    std::string status;    ///< as in ExecutionView::status
    long long count = 0;   ///< runs in that state, over every shard
  };
  std::vector<Count> runs;          ///< sorted by workflow, then status
  std::chrono::seconds window{60};  ///< the window of the two counts below
  long long started = 0;            ///< runs created within the window
  long long completed = 0;          ///< runs closed within the window
};

/// Runs started, completed and failed in one minute (`Engine::activity`).
struct MinuteActivity {
  long long minute = 0;     ///< its start, in seconds since the epoch (UTC)
  long long started = 0;    ///< runs created in that minute
  long long completed = 0;  ///< runs that completed in it
  long long failed = 0;     ///< runs that failed in it (retries exhausted or contained)
};

/// One page of `Engine::list_executions`.
struct ExecutionPage {
  std::vector<ExecutionSummary> items;     ///< newest first, at most the filter's limit
  std::optional<std::string> next_cursor;  ///< absent on the last page
};

/// A run that exhausted its retries (ENG-14) or crashed its workers
/// (ENG-18).
struct EngineDeadLetter {
  std::string execution_id;                ///< pass to Engine::replay_dead_letter
  std::string workflow_name;               ///< the registered workflow
  std::optional<std::string> workflow_id;  ///< business identity, if any
  /// "failed": its attempts ran out; "crashed_worker": the poison-pill
  /// threshold.
  std::string reason = "failed";
  std::string error;      ///< the last failure's message
  int attempts = 0;       ///< attempts made before it landed here
  std::string failed_at;  ///< ISO 8601, UTC
  int shard = 0;          ///< index of the shard holding the run
};

/// One page of `Engine::dead_letter_page`.
struct EngineDeadLetterPage {
  std::vector<EngineDeadLetter> items;     ///< newest failure first
  std::optional<std::string> next_cursor;  ///< absent on the last page
};

/// Cancel and terminate (ENG-17).
///
/// Cancel is cooperative: the run sees it at its next durable operation
/// (step, sleep, wait_signal, start_child) as a thrown `Cancelled`, may catch
/// it and compensate with further steps, and ends as `cancelled`. Terminate is
/// immediate: the run is `terminated` at once and the worker still executing
/// it is fenced off (its next write fails and it stops).
struct StopRequest {
  std::string execution_id;  ///< the run to stop; kNotFound when no shard has it
  /// Why, recorded in the run's history (at most kMaxStopReason bytes of
  /// UTF-8). Required.
  std::string reason;
  /// Who asked (an operator, "api", "cli:<user>"), recorded beside the reason
  /// (at most kMaxStopReason bytes). Default "client".
  std::string requested_by = "client";
};
inline constexpr size_t kMaxStopReason = 1024;

enum class StopOutcomeKind {
  kRequested,          ///< cancel: recorded; the run sees it at its next durable operation
  kAlreadyRequested,   ///< cancel: an earlier request is pending or was seen (idempotent)
  kTerminated,         ///< terminate: the run is terminated now
  kAlreadyTerminated,  ///< terminate: it was already (idempotent)
};
[[nodiscard]] std::string_view to_string(StopOutcomeKind kind);

/// The success side of a cancel or terminate.
struct StopOutcome {
  StopOutcomeKind kind;      ///< what the call did
  std::string execution_id;  ///< the run, as requested
  std::string status;        ///< the run's status after the call
};

/// Bulk cancel/terminate: every open run (not closed) matching the filter.
struct StopFilter {
  std::optional<std::string> workflow;  ///< workflow name; unset: every workflow
  /// pending, running or waiting; unset: all three.
  std::optional<std::string> status;
};

/// The result of `Engine::cancel_where` / `terminate_where`.
struct BulkStopOutcome {
  long long matched = 0;  ///< open runs matching the filter (the preview count)
  long long stopped = 0;  ///< newly requested/terminated (0 on a dry run)
  bool dry_run = false;   ///< the call only counted (nothing was stopped)
};

/// One shard as `Engine::shard_status` found it, probed with a round trip.
struct ShardStatus {
  int index = 0;                     ///< position in the shard list (ExecutionSummary::shard)
  std::string location;              ///< host:port/database (no credentials)
  bool readable = false;             ///< the shard answered the probe
  std::optional<std::string> error;  ///< why it did not, when it did not
};

}  // namespace harvest::engine
