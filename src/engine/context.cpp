#include <fmt/format.h>

#include "common/fault.hpp"
#include "engine/run_state.hpp"
#include "engine/workflow.hpp"

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

void RunState::load() {
  auto conn = pool().acquire();
  if (!conn) throw HistoryUnavailable{conn.error()};
  auto seq = (*conn)->exec("SELECT signal_seq FROM harvest_workflow_executions WHERE id = $1",
                           {execution_id});
  if (!seq) throw HistoryUnavailable{seq.error()};
  if (!seq->empty()) signal_seq_seen = seq->get_int(0, "signal_seq");
  auto ev = (*conn)->exec(
      "SELECT op_seq, kind, name, payload::text AS payload FROM harvest_workflow_events "
      "WHERE execution_id = $1 AND op_seq IS NOT NULL ORDER BY op_seq",
      {execution_id});
  if (!ev) throw HistoryUnavailable{ev.error()};
  for (int i = 0; i < ev->rows(); ++i) {
    ops[static_cast<int>(ev->get_int(i, "op_seq"))] =
        RecordedOp{ev->get(i, "kind"), ev->get_opt(i, "name").value_or(""),
                   Json::parse(ev->get_opt(i, "payload").value_or("null"))};
  }
}

const RecordedOp* RunState::next_recorded(const std::string& kind, const std::string& name) {
  auto it = ops.find(cursor_);
  if (it == ops.end()) return nullptr;
  const RecordedOp& op = it->second;
  // A signal op records either a reception or a timeout; a step its result.
  bool kind_ok = op.kind == kind || (kind == "SignalReceived" && op.kind == "SignalTimedOut");
  if (!kind_ok || op.name != name) {
    throw std::runtime_error(fmt::format(
        "non-deterministic workflow: operation {} was recorded as {} '{}' but the code now asks "
        "for {} '{}'",
        cursor_, op.kind, op.name, kind, name));
  }
  if (op.kind == "SignalReceived") last_signal_id[name] = op.payload.value("signal_id", 0LL);
  ++cursor_;
  return &op;
}

void RunState::record(const std::string& kind, const std::string& name, const Json& payload) {
  auto conn = pool().acquire();
  if (!conn) throw HistoryUnavailable{conn.error()};
  auto tx = store::Transaction::begin(**conn);
  if (!tx) throw HistoryUnavailable{tx.error()};
  // Fence: only the lease holder may extend the history; the same statement
  // renews the lease.
  auto fence = (*conn)->exec(
      "UPDATE harvest_workflow_executions SET lease_expires_at = now() + $3 * interval "
      "'1 millisecond', updated_at = now() WHERE id = $1 AND lease_owner = $2 AND status = "
      "'running'",
      {execution_id, owner_, std::to_string(lease_.count())});
  if (!fence) throw HistoryUnavailable{fence.error()};
  if (fence->affected() == 0) throw LeaseLost{};
  auto ins = (*conn)->exec(
      "INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload) "
      "VALUES ($1, $2, $3, $4, $5::jsonb)",
      {execution_id, std::to_string(cursor_), kind, name, payload.dump()});
  if (!ins) {
    // A unique violation on (execution_id, op_seq): a new lease holder wrote
    // this position first.
    if (ins.error().kind == ErrorKind::kConflict) throw LeaseLost{};
    // A result PostgreSQL refuses (e.g. "\u0000" in JSON) fails the attempt.
    if (is_permanent(ins.error())) {
      throw std::runtime_error(
          fmt::format("cannot record {} '{}': {}", kind, name, ins.error().message));
    }
    throw HistoryUnavailable{ins.error()};
  }
  if (auto c = tx->commit(); !c) throw HistoryUnavailable{c.error()};
  ops[cursor_] = RecordedOp{kind, name, payload};
  if (kind == "SignalReceived") last_signal_id[name] = payload.value("signal_id", 0LL);
  ++cursor_;
}

std::optional<std::pair<long long, Json>> RunState::next_signal(const std::string& name) {
  auto conn = pool().acquire();
  if (!conn) throw HistoryUnavailable{conn.error()};
  long long after = last_signal_id.contains(name) ? last_signal_id[name] : 0;
  auto r = (*conn)->exec(
      "SELECT id, payload::text AS payload FROM harvest_signals "
      "WHERE execution_id = $1 AND name = $2 AND id > $3 ORDER BY id LIMIT 1",
      {execution_id, name, std::to_string(after)});
  if (!r) throw HistoryUnavailable{r.error()};
  if (r->empty()) return std::nullopt;
  return std::make_pair(r->get_int(0, "id"), Json::parse(r->get(0, "payload")));
}

const std::string& WorkflowContext::execution_id() const {
  return state_.execution_id;
}
const std::optional<std::string>& WorkflowContext::workflow_id() const {
  return state_.workflow_id;
}
int WorkflowContext::attempt() const {
  return state_.attempt;
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
    deadline_ms = to_ms(Clock::now() + timeout);
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
  if (Clock::now() >= from_ms(deadline_ms)) {
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
    deadline_ms = to_ms(Clock::now() + duration);
    state_.record("TimerStarted", "sleep", deadline_ms);
  }
  if (state_.next_recorded("TimerFired", "sleep")) return;
  if (Clock::now() >= from_ms(deadline_ms)) {
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
      workflow_id.value_or(fmt::format("{}:child:{}", state_.execution_id, state_.current_seq()));
  req.input = std::move(input);
  req.source = StartSource::kChild;
  req.source_ref = state_.execution_id;
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
