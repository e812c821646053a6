#include <fmt/format.h>

#include <harvest/common/fault.hpp>
#include <harvest/common/json.hpp>
#include <harvest/engine/run_state.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::engine {

namespace {

using Clock = std::chrono::system_clock;

long long to_ms(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
Clock::time_point from_ms(long long ms) {
  return Clock::time_point(std::chrono::milliseconds(ms));
}

}  // namespace

const RecordedOp* RunState::next_recorded(const std::string& kind, const std::string& name) {
  if (!releases_due_.empty()) {
    std::vector<std::string> due;
    due.swap(releases_due_);
    for (const auto& lock : due) release_lock_op(lock);
  }
  return lookup(kind, name, true);
}

const RecordedOp* RunState::lookup(const std::string& kind, const std::string& name,
                                   bool deliver_cancel) {
  auto it = run_.ops.find(cursor_);
  if (it == run_.ops.end()) {
    if (deliver_cancel && cancel_ && cancel_->load() && !cancel_delivered_) {
      // Delivered here, once: recorded first, so a replay delivers it at
      // this same position.
      std::string reason;
      {
        auto conn = engine_.pool(shard_).acquire();
        if (!conn) throw HistoryUnavailable{conn.error()};
        auto r = ExecutionStore(**conn).cancel_reason(run_.id);
        if (!r) throw HistoryUnavailable{r.error()};
        reason = std::move(*r);
      }
      record("Cancelled", name, Json{{"reason", reason}, {"at", kind}});
      cancel_delivered_ = true;
      throw Cancelled(reason);
    }
    return nullptr;
  }
  const RecordedOp& op = it->second;
  if (op.kind == "Cancelled") {
    ++cursor_;
    cancel_delivered_ = true;
    throw Cancelled(op.payload.value("reason", ""));
  }
  // A signal op records either a reception or a timeout; a step its result.
  bool kind_ok = op.kind == kind || (kind == "SignalReceived" && op.kind == "SignalTimedOut");
  if (!kind_ok || op.name != name) {
    throw std::runtime_error(fmt::format(
        "non-deterministic workflow: operation {} was recorded as {} '{}' but the code now asks "
        "for {} '{}'",
        cursor_, op.kind, op.name, kind, name));
  }
  if (op.kind == "SignalReceived") last_signal_id_[name] = op.payload.value("signal_id", 0LL);
  ++cursor_;
  return &op;
}

void RunState::record(const std::string& kind, const std::string& name, const Json& payload) {
  // A result PostgreSQL cannot store (e.g. "\u0000" in a string) fails the
  // attempt, before anything is sent.
  if (auto ok = check_json_storable(payload); !ok) {
    throw std::runtime_error(
        fmt::format("cannot record {} '{}': {}", kind, name, ok.error().message));
  }
  RecordedOp op{kind, name, payload};
  if (auto r = writer_.record(fence(), cursor_, op); !r) {
    // kConflict: another holder took the lease or wrote this position first.
    if (r.error().kind == ErrorKind::kConflict) throw LeaseLost{};
    if (is_permanent(r.error())) {
      throw std::runtime_error(
          fmt::format("cannot record {} '{}': {}", kind, name, r.error().message));
    }
    throw HistoryUnavailable{r.error()};
  }
  if (kind == "SignalReceived") last_signal_id_[name] = payload.value("signal_id", 0LL);
  run_.ops[cursor_] = std::move(op);
  ++cursor_;
}

std::optional<std::pair<long long, Json>> RunState::next_signal(const std::string& name) {
  auto conn = engine_.pool(shard_).acquire();
  if (!conn) throw HistoryUnavailable{conn.error()};
  auto it = last_signal_id_.find(name);
  auto r = ExecutionStore(**conn).next_signal(run_.id, name,
                                              it == last_signal_id_.end() ? 0 : it->second);
  if (!r) throw HistoryUnavailable{r.error()};
  return *r;
}

namespace {

// A store call of the mutex: transient failures abandon the attempt, a lost
// fence stops the run.
template <typename F>
bool mutex_call(Engine& engine, size_t shard, F&& call) {
  auto conn = engine.pool(shard).acquire();
  if (!conn) throw HistoryUnavailable{conn.error()};
  ExecutionStore store(**conn);
  Result<bool> r = call(store);
  if (!r) {
    if (is_permanent(r.error())) throw std::runtime_error("durable lock: " + r.error().message);
    throw HistoryUnavailable{r.error()};
  }
  return *r;
}

constexpr size_t kMaxLockName = 200;
// A waiter re-checks the lock this often even if no wake-up reaches it (the
// holder's worker died between ending the run and waking the next).
constexpr std::chrono::seconds kLockRecheck{10};

}  // namespace

void RunState::enqueue_lock(const std::string& name) {
  used_locks_ = true;
  if (!mutex_call(engine_, shard_,
                  [&](ExecutionStore& s) { return s.enqueue_lock(fence(), name); }))
    throw LeaseLost{};
}

bool RunState::try_grant_lock(const std::string& name) {
  return mutex_call(engine_, shard_,
                    [&](ExecutionStore& s) { return s.try_grant_lock(run_.id, name); });
}

void RunState::leave_lock(const std::string& name) {
  if (!mutex_call(engine_, shard_,
                  [&](ExecutionStore& s) { return s.release_lock(fence(), name); }))
    throw LeaseLost{};
}

void RunState::release_lock_op(const std::string& name) {
  held_locks_.erase(name);
  if (lookup("LockReleased", name, false)) return;
  leave_lock(name);
  record("LockReleased", name, nullptr);
}

void RunState::defer_release(const std::string& name) noexcept {
  if (held_locks_.erase(name) == 0) return;
  try {
    releases_due_.push_back(name);
  } catch (...) {
    // Out of memory: the lock goes back when the run ends instead.
  }
}

LockGuard::~LockGuard() {
  if (state_) state_->defer_release(name_);
}

void LockGuard::release() {
  if (!state_) return;
  RunState* state = std::exchange(state_, nullptr);
  if (state->holds_lock(name_)) state->release_lock_op(name_);
}

LockGuard WorkflowContext::lock(const std::string& name) {
  if (name.empty() || name.size() > kMaxLockName) {
    throw std::invalid_argument(
        fmt::format("lock name must be 1..{} bytes, got {} bytes", kMaxLockName, name.size()));
  }
  if (auto ok = check_json_storable(Json(name)); !ok) {
    throw std::invalid_argument("lock name cannot be stored: " + ok.error().message);
  }
  if (state_.holds_lock(name)) {
    throw std::logic_error(fmt::format(
        "lock '{}' is already held by this run (a durable lock is not re-entrant)", name));
  }
  state_.note_lock_used();
  // Two positions, like wait_signal: the place in line, then the grant.
  if (!state_.next_recorded("LockRequested", name)) {
    state_.enqueue_lock(name);
    state_.record("LockRequested", name, nullptr);
  }
  try {
    if (state_.next_recorded("LockAcquired", name)) {
      state_.mark_held(name);
      return LockGuard(&state_, name);
    }
  } catch (const Cancelled&) {
    state_.leave_lock(name);  // cancelled while waiting: give up the place
    throw;
  }
  if (!state_.try_grant_lock(name)) {
    throw Suspension{state_.now() + kLockRecheck};
  }
  state_.record("LockAcquired", name, nullptr);
  state_.mark_held(name);
  return LockGuard(&state_, name);
}

const std::string& WorkflowContext::execution_id() const {
  return state_.run().id;
}
const std::optional<std::string>& WorkflowContext::workflow_id() const {
  return state_.run().workflow_id;
}
int WorkflowContext::attempt() const {
  return state_.run().attempt;
}
bool WorkflowContext::cancelled() const {
  return state_.cancel_delivered();
}

Json WorkflowContext::step_json(const std::string& name, const std::function<Json()>& fn) {
  if (const auto* op = state_.next_recorded("StepCompleted", name)) return op->payload;
  Json result = fn();
  state_.record("StepCompleted", name, result);
  HARVEST_FAULT_POINT("worker.after_step_recorded");
  return result;
}

std::optional<Json> WorkflowContext::wait_signal(const std::string& name,
                                                 std::chrono::milliseconds timeout) {
  // Two positions: the deadline (fixed on first execution, replayed after),
  // then the outcome (a signal or a timeout).
  long long deadline_ms;
  if (const auto* op = state_.next_recorded("SignalDeadline", name)) {
    deadline_ms = op->payload.get<long long>();
  } else {
    deadline_ms = to_ms(state_.now() + timeout);
    state_.record("SignalDeadline", name, deadline_ms);
  }
  if (const auto* op = state_.next_recorded("SignalReceived", name)) {
    if (op->kind == "SignalTimedOut") return std::nullopt;
    return op->payload.at("payload");
  }
  if (auto sig = state_.next_signal(name)) {
    state_.record("SignalReceived", name,
                  Json{{"signal_id", sig->first}, {"payload", sig->second}});
    return sig->second;
  }
  if (state_.now() >= from_ms(deadline_ms)) {
    state_.record("SignalTimedOut", name, nullptr);
    return std::nullopt;
  }
  throw Suspension{from_ms(deadline_ms)};
}

void WorkflowContext::sleep(std::chrono::milliseconds duration) {
  long long deadline_ms;
  if (const auto* op = state_.next_recorded("TimerStarted", "sleep")) {
    deadline_ms = op->payload.get<long long>();
  } else {
    deadline_ms = to_ms(state_.now() + duration);
    state_.record("TimerStarted", "sleep", deadline_ms);
  }
  if (state_.next_recorded("TimerFired", "sleep")) return;
  if (state_.now() >= from_ms(deadline_ms)) {
    state_.record("TimerFired", "sleep", nullptr);
    return;
  }
  throw Suspension{from_ms(deadline_ms)};
}

std::string WorkflowContext::start_child(const std::string& workflow, Json input,
                                         std::optional<std::string> workflow_id) {
  if (const auto* op = state_.next_recorded("ChildStarted", workflow)) {
    return op->payload.value("execution_id", "");
  }
  StartRequest req;
  req.workflow = workflow;
  req.workflow_id =
      workflow_id.value_or(fmt::format("{}:child:{}", state_.run().id, state_.current_seq()));
  req.input = std::move(input);
  req.source = StartSource::kChild;
  req.source_ref = state_.run().id;
  auto r = state_.engine().start(req);
  if (!r) {
    if (should_retry(r.error())) throw HistoryUnavailable{r.error()};
    throw std::runtime_error("start_child failed: " + r.error().describe());
  }
  // A deferred (throttled) child has no execution id yet.
  std::string id = r->execution_id.value_or("");
  state_.record("ChildStarted", workflow,
                Json{{"execution_id", id}, {"workflow_id", *req.workflow_id}});
  return id;
}

}  // namespace harvest::engine
