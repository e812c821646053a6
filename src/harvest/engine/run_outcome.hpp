// How a run leaves the worker (Worker::execute): what happens when its
// workflow returned or threw — completed, failed (retried, or for good),
// suspended, cancelled, terminated or taken over meanwhile, or abandoned
// for a retry after a history outage — each written fenced on the run's
// lease, with its log line and metrics; and, however it left, the durable
// locks and per-key slots it may be holding up passed on. Internal to the
// engine.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>

#include <harvest/common/error.hpp>
#include <harvest/common/json.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/run_state.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::engine {

// The outcome of one run on one run thread. Made by execute() once the run's
// claim state is set up and before its workflow runs; one of returned() and
// threw() is then called, once. Not thread-safe (the run thread's own); keeps
// references to everything it is given, which must outlive it.
class Worker::RunOutcome {
 public:
  // `state`: the run, on `shard`; `def`: its workflow; `started`: when it
  // began executing here (the run-time metric).
  RunOutcome(Worker& worker, size_t shard, RunState& state, const WorkflowDef& def,
             std::chrono::steady_clock::time_point started);
  // However the run left — an outcome written or not, or an exception going
  // through execute() — passes on what it may be holding up: the durable
  // locks of ended runs (ENG-20) and, for a keyed run, the key (ENG-19).
  ~RunOutcome();
  RunOutcome(const RunOutcome&) = delete;
  RunOutcome& operator=(const RunOutcome&) = delete;

  // The workflow returned `output`: the run completes (a completed entity
  // run may hand its unread signals to its next run), or ends cancelled if it
  // saw its cancellation, or the attempt fails if the output cannot be
  // stored.
  void returned(Json output);
  // The workflow, or returned(), threw `thrown`: a Suspension parks the run,
  // Cancelled ends it cancelled, LeaseLost leaves it to whoever holds it now,
  // HistoryUnavailable hands it back for a retry shortly, and any other
  // exception fails the attempt. fault::InjectedCrash is rethrown, nothing
  // written: the run thread dies there.
  void threw(std::exception_ptr thrown);

 private:
  // The attempt failed with `what`: it ends cancelled if the run saw its
  // cancellation (a cancelled run is never retried), else fail_attempt().
  void failed(const std::string& what);
  // Retry with backoff, or record the failure (and the engine dead letter)
  // once the attempts are used up.
  void fail_attempt(const std::string& what);
  // The run saw its cancellation: it ends `cancelled` with what it returned
  // (`output`) or the error it ended with.
  void end_cancelled(const Json& output, const std::optional<std::string>& error);
  // Writes the completion with `output`; true when it took effect.
  // `completion` tells what an entity run handed to its next run.
  [[nodiscard]] Result<bool> complete(const Json& output, CompletedRun& completion);
  // Observes the run's time on this worker.
  void observe_run();

  Worker& worker_;
  const size_t shard_;
  RunState& state_;
  const ClaimedRun& run_;
  const WorkflowDef& def_;
  const Fence fence_;
  const std::chrono::steady_clock::time_point started_;
};

}  // namespace harvest::engine
