// Workflow definitions and the durable `WorkflowContext` (ENG-3).
//
// A workflow is a function `Out(WorkflowContext&, In)` registered by name.
// It runs durably by replay: every durable operation (`step`, `wait_signal`,
// `sleep`, `start_child`, `lock`) is numbered in call order and its result recorded;
// when a run resumes on another worker the function is called again from the
// top and recorded operations return their recorded results instead of
// running again. Workflow code must therefore be deterministic outside of
// steps, and must not swallow `Suspension` (do not `catch (...)` without
// rethrowing).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <harvest/common/error.hpp>
#include <harvest/engine/types.hpp>

namespace harvest::engine {

class RunState;  ///< one run's replay cursor and database access (context.cpp)

/// Thrown by a durable operation (`step`, `sleep`, `wait_signal`,
/// `start_child`) of a run an operator cancelled (ENG-17), once, at the first
/// such operation after the worker learns of the request (at claim, or at
/// its next lease renewal). The run may catch it and compensate with further
/// durable operations; however it then ends — returning, rethrowing, or
/// throwing anything else — it ends `cancelled` (never retried). The
/// position where it was delivered is recorded, so a replay throws it at the
/// same place. Deliberately not a std::exception: a `catch (const
/// std::exception&)` written for step failures must not swallow it.
class Cancelled {
 public:
  /// Constructed by the engine when it delivers a cancel request.
  explicit Cancelled(std::string reason) : reason_(std::move(reason)) {}
  /// The operator's reason, as given in the StopRequest.
  [[nodiscard]] const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

/// A durable lock a run holds (ENG-20), from `WorkflowContext::lock`. Moving
/// it moves the obligation to hand the lock back.
class [[nodiscard]] LockGuard {
 public:
  /// Takes over `other`'s lock; `other` then hands back nothing.
  LockGuard(LockGuard&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)), name_(std::move(other.name_)) {}
  LockGuard& operator=(LockGuard&&) = delete;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  /// Hands the lock back at the run's next durable operation, or when the run
  /// ends, whichever comes first: before anything the workflow does durably
  /// after this scope. Never throws and never touches the database itself,
  /// so it is safe while an exception unwinds (a suspension inside the scope
  /// keeps the lock: the run is parked, not gone).
  ~LockGuard();
  /// Hands the lock back now, as a durable operation of its own (the next
  /// position of the run's history). Idempotent.
  void release();
  /// The lock's name, as passed to `WorkflowContext::lock`.
  [[nodiscard]] const std::string& name() const { return name_; }

 private:
  friend class WorkflowContext;
  LockGuard(RunState* state, std::string name) : state_(state), name_(std::move(name)) {}
  RunState* state_;
  std::string name_;
};

/// A run's handle on its durable operations, passed to the workflow function.
/// The worker creates one each time it executes the run (an attempt or a
/// resume) and it lives only for that call: do not keep it or hand it to
/// another thread. Not thread-safe.
class WorkflowContext {
 public:
  /// Created by the worker; keeps a reference to `state`.
  explicit WorkflowContext(RunState& state) : state_(state) {}

  /// This run's execution id (a UUID).
  [[nodiscard]] const std::string& execution_id() const;
  /// The business identity the run was started with, if any.
  [[nodiscard]] const std::optional<std::string>& workflow_id() const;
  /// The current attempt, from 1: each retry after a failure adds one; a
  /// replay from the dead letters starts again at 1.
  [[nodiscard]] int attempt() const;
  /// Whether this run has been handed its `Cancelled` (it is compensating).
  [[nodiscard]] bool cancelled() const;

  /// Runs `fn` once and records its (JSON-serialisable) result; on replay
  /// returns the recorded result without calling `fn`. An exception from `fn`
  /// fails the attempt (nothing is recorded).
  template <typename F>
  auto step(const std::string& name, F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    if constexpr (std::is_void_v<R>) {
      step_json(name, [&]() -> Json {
        fn();
        return nullptr;
      });
    } else {
      Json j = step_json(name, [&]() -> Json { return Json(fn()); });
      return j.template get<R>();
    }
  }

  /// The next signal named `name` not yet received by this run, in the order
  /// the database recorded them; std::nullopt once `timeout` elapses. Suspends
  /// the run (freeing the worker) while there is none.
  [[nodiscard]] std::optional<Json> wait_signal(const std::string& name,
                                                std::chrono::milliseconds timeout);
  /// Durable sleep: the run suspends and resumes after `duration`, on any worker.
  void sleep(std::chrono::milliseconds duration);
  /// Takes the durable lock `name` (ENG-20): a named mutex shared by every run
  /// of the shard, whatever its workflow. Waiters are served in the order
  /// they asked; while the lock is held by another run this run suspends
  /// (freeing the worker) until the holder hands it back. The lock belongs to
  /// the run, not to the worker: it is held across steps, sleeps, signal
  /// waits and worker crashes (a run taken over after its lease lapsed still
  /// holds it and carries on), and handed back when the guard goes out of
  /// scope, or when the run completes, fails, is cancelled or terminated.
  /// A cancel delivered while waiting throws `Cancelled` here and gives up
  /// the place in line. Names are 1..200 bytes of storable text; a run may
  /// hold several different locks, but not the same one twice.
  ///
  /// Terminating the holder does not wait for its worker: the terminated run
  /// leaves the line at once and the next waiter is granted the lock (woken
  /// by the terminate, or on its own re-check, every 10 s, if that wake-up
  /// was lost) while the terminated run's worker may still be executing one
  /// of its steps. That step runs on to its end — whatever it does happens —
  /// and then the run stops: its worker finds the lease gone and records
  /// nothing. For as long as that step takes, code of two runs executes
  /// under the same lock. Cancel the holder instead when the lock must exclude
  /// any overlap: a run sees a cancel at its next durable call, after the
  /// step in flight has returned, and only then hands the lock on.
  LockGuard lock(const std::string& name);
  /// Starts a child workflow exactly once (its workflow_id defaults to one
  /// derived from this run and the call position) and returns its execution id.
  [[nodiscard]] std::string start_child(const std::string& workflow, Json input,
                                        std::optional<std::string> workflow_id = std::nullopt);

 private:
  Json step_json(const std::string& name, const std::function<Json()>& fn);
  RunState& state_;
};

/// A type-erased workflow body: JSON input to JSON output.
using WorkflowFn = std::function<Json(WorkflowContext&, const Json&)>;

/// A registered workflow: what `WorkflowRegistry::add` builds from a typed
/// function, or what `add_def` takes directly.
struct WorkflowDef {
  std::string name;  ///< unique in the registry; 1 to 200 bytes of UTF-8
  WorkflowFn fn;     ///< the body, called from the top each time the run executes
  /// Checks that an input deserialises to the workflow's input type; the error
  /// text names what is wrong.
  std::function<std::optional<std::string>(const Json&)> validate_input;
  WorkflowOptions options;  ///< retries, admission and concurrency of its runs
};

/// \cond INTERNAL
namespace detail {
template <typename T>
struct CallableArgs : CallableArgs<decltype(&T::operator())> {};
template <typename C, typename R, typename Ctx, typename In>
struct CallableArgs<R (C::*)(Ctx, In) const> {
  using Out = R;
  using Input = std::remove_cvref_t<In>;
};
template <typename C, typename R, typename Ctx, typename In>
struct CallableArgs<R (C::*)(Ctx, In)> {
  using Out = R;
  using Input = std::remove_cvref_t<In>;
};
template <typename R, typename Ctx, typename In>
struct CallableArgs<R (*)(Ctx, In)> {
  using Out = R;
  using Input = std::remove_cvref_t<In>;
};
}  // namespace detail
/// \endcond

/// The set of workflows a process can run and start. Populated before the
/// engine opens; read-only afterwards (thread-safe to read).
class WorkflowRegistry {
 public:
  /// Registers `fn: Out(WorkflowContext&, In)` under `name`. In and Out convert
  /// to and from JSON with nlohmann's `to_json`/`from_json`.
  template <typename F>
  WorkflowRegistry& add(std::string name, F fn, WorkflowOptions options = {}) {
    using Args = detail::CallableArgs<std::decay_t<F>>;
    using In = typename Args::Input;
    using Out = typename Args::Out;
    WorkflowDef def;
    def.name = name;
    def.options = options;
    def.fn = [fn = std::move(fn)](WorkflowContext& ctx, const Json& input) -> Json {
      if constexpr (std::is_void_v<Out>) {
        fn(ctx, input.get<In>());
        return nullptr;
      } else {
        return Json(fn(ctx, input.get<In>()));
      }
    };
    def.validate_input = [](const Json& input) -> std::optional<std::string> {
      try {
        (void)input.get<In>();
        return std::nullopt;
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    };
    return add_def(std::move(def));
  }

  /// Registers a ready-made definition (kept by value). Throws ConfigError
  /// when the name is empty, over 200 bytes, holds NUL, is not UTF-8 or is
  /// already registered.
  /// Without `validate_input`, every input is accepted.
  WorkflowRegistry& add_def(WorkflowDef def);
  /// The definition registered as `name`, or nullptr; owned by the registry.
  [[nodiscard]] const WorkflowDef* find(std::string_view name) const;
  /// Every registered name, in sorted order.
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  std::map<std::string, WorkflowDef, std::less<>> defs_;
};

}  // namespace harvest::engine
