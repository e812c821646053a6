#include <fmt/format.h>

#include <algorithm>

#include <harvest/common/fault.hpp>
#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/engine/history_writer.hpp>
#include <harvest/engine/run_outcome.hpp>
#include <harvest/engine/sql/work.hpp>
#include <harvest/engine/work_signal.hpp>

namespace harvest::engine {

namespace {

// The longest a stored error text may be (it is served by the API).
constexpr size_t kMaxErrorText = 4096;

std::string error_text(const std::string& what) {
  std::string e = to_valid_utf8(what);
  if (e.size() > kMaxErrorText) e = to_valid_utf8(e.substr(0, kMaxErrorText)) + "…";
  return e;
}

}  // namespace

Worker::RunOutcome::RunOutcome(Worker& worker, size_t shard, RunState& state,
                               const WorkflowDef& def,
                               std::chrono::steady_clock::time_point started)
    : worker_(worker),
      shard_(shard),
      state_(state),
      run_(state.run()),
      def_(def),
      fence_{run_.id, run_.lease},
      started_(started) {}

Worker::RunOutcome::~RunOutcome() {
  // ENG-20: a run that queued for or held a durable lock may have just ended
  // with it; the locks of ended runs pass to the next run in line.
  if (state_.used_locks()) worker_.sweep_locks(shard_);
  // ENG-19: however a keyed run leaves this worker, a run waiting for its
  // key may now be claimed: wake the workers here and in other processes.
  if (!def_.options.concurrency) return;
  worker_.engine_.work_signal().notify();
  if (!worker_.config_.listen) return;
  if (auto conn = worker_.engine_.pool(shard_).acquire()) {
    (void)(*conn)->exec(sql::work::notify);
  }
}

void Worker::RunOutcome::returned(Json output) {
  if (state_.cancel_delivered()) {
    // It caught its Cancelled, compensated and returned.
    if (!check_json_storable(output)) output = nullptr;
    end_cancelled(output, std::nullopt);
    return;
  }
  if (auto ok = check_json_storable(output); !ok) {
    // An output PostgreSQL cannot store fails the attempt rather than
    // leaving the run to be re-leased forever.
    failed("cannot record the workflow's output: " + ok.error().message);
    return;
  }
  CompletedRun completion;
  Result<bool> done = complete(output, completion);
  if (!done && is_permanent(done.error())) {
    failed("cannot record the workflow's output: " + done.error().message);
    return;
  }
  // Not recorded (transient: the lease lapses and it runs again) or the
  // lease was taken over: whoever completes it counts it.
  if (!done || !*done) return;
  if (completion.next_run) {
    log::info(
        "execution {} ({} '{}') completed with {} signal(s) unread; they go to its next "
        "run {}",
        run_.id, run_.workflow_name, run_.workflow_id.value_or(""), completion.carried_signals,
        *completion.next_run);
    worker_.engine_.metrics().increment(metrics::kEngineSignalsCarried,
                                        {{"workflow", run_.workflow_name}},
                                        completion.carried_signals);
    worker_.engine_.work_signal().notify();
  }
  worker_.engine_.metrics().increment(metrics::kEngineRunsCompleted,
                                      {{"workflow", run_.workflow_name}});
  observe_run();
}

Result<bool> Worker::RunOutcome::complete(const Json& output, CompletedRun& completion) {
  if (run_.entity_reuse) {
    // An entity run may hand unread signals to its next run: its own path.
    return worker_.settle(shard_, run_, [&](ExecutionStore& s) -> Result<bool> {
      auto c = s.complete(fence_, output, run_.entity_reuse);
      if (!c) return fail(c.error());
      completion = std::move(*c);
      return completion.completed;
    });
  }
  // Any other completion joins the shard's group commit of run writes.
  worker_.forget(run_.lease);
  Result<bool> done = worker_.writers_.at(shard_)->complete(fence_, output);
  if (!done) {
    log::warn("execution {}: cannot record outcome ({}); it resumes after its lease lapses",
              run_.id, done.error().describe());
  }
  return done;
}

void Worker::RunOutcome::threw(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const Suspension& s) {
    const long long until_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(s.until.time_since_epoch()).count();
    (void)worker_.settle(shard_, run_, [&](ExecutionStore& st) {
      return st.suspend(fence_, state_.signal_seq_seen(), until_ms);
    });
  } catch (const Cancelled&) {
    end_cancelled(nullptr, std::nullopt);
  } catch (const LeaseLost&) {
    log::warn(
        "execution {}: lease lost (taken over by another worker, or the run was "
        "terminated); stopping this run",
        run_.id);
    worker_.forget(run_.lease);
  } catch (const HistoryUnavailable& h) {
    log::warn("execution {}: history unavailable ({}); retrying shortly", run_.id,
              h.error.describe());
    (void)worker_.settle(shard_, run_, [&](ExecutionStore& s) {
      return s.release(fence_, std::chrono::seconds(1));
    });
  } catch (const fault::InjectedCrash&) {
    // The component "died" here: no outcome is written and the lease is not
    // renewed, exactly as if the process had been killed.
    worker_.forget(run_.lease);
    throw;
  } catch (const std::exception& e) {
    failed(e.what());
  } catch (...) {
    failed("the workflow threw a non-standard exception");
  }
}

void Worker::RunOutcome::failed(const std::string& what) {
  // An attempt that fails after the run saw its cancellation ends it
  // cancelled: a cancelled run is never retried.
  if (state_.cancel_delivered()) {
    end_cancelled(nullptr, what);
    return;
  }
  fail_attempt(what);
}

void Worker::RunOutcome::fail_attempt(const std::string& what) {
  const std::string error = error_text(what);
  if (run_.attempt < run_.max_attempts) {
    auto backoff = def_.options.retry_backoff * (1LL << std::min(run_.attempt - 1, 20));
    log::warn("execution {} ({}) attempt {}/{} failed: {}; retrying in {} ms", run_.id,
              run_.workflow_name, run_.attempt, run_.max_attempts, error, backoff.count());
    (void)worker_.settle(shard_, run_, [&](ExecutionStore& s) {
      return s.retry_later(fence_, error, backoff, run_.attempt);
    });
    return;
  }
  log::error("execution {} ({}) failed after {} attempts: {}", run_.id, run_.workflow_name,
             run_.attempt, error);
  (void)worker_.settle(shard_, run_, [&](ExecutionStore& s) { return s.fail_run(fence_, error); });
  worker_.engine_.metrics().increment(metrics::kEngineRunsFailed,
                                      {{"workflow", run_.workflow_name}});
  observe_run();
}

void Worker::RunOutcome::end_cancelled(const Json& output,
                                       const std::optional<std::string>& error) {
  auto done = worker_.settle(shard_, run_, [&](ExecutionStore& s) {
    return s.finish_cancelled(fence_, output, error ? std::optional(error_text(*error)) : error);
  });
  if (!done || !*done) return;  // resumes elsewhere, or was terminated meanwhile
  log::info("execution {} ({}) cancelled", run_.id, run_.workflow_name);
  worker_.engine_.metrics().increment(metrics::kEngineRunsCancelled,
                                      {{"workflow", run_.workflow_name}});
  observe_run();
}

void Worker::RunOutcome::observe_run() {
  worker_.engine_.metrics().observe(
      metrics::kEngineRunSeconds, {{"workflow", run_.workflow_name}},
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
}

}  // namespace harvest::engine
