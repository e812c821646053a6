// A durable workflow end to end: started, crashed mid-run, resumed by another
// process without repeating its finished step, woken by a signal, completed.
// scripts/demo.sh drives it; each sub-command is one process:
//   engine_demo start | work <until-status> | signal | show
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <thread>

#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>

using namespace harvest;
using namespace harvest::engine;
using namespace std::chrono_literals;

namespace {

// Each step appends a line here, so the demo can show what really ran.
void effect(const std::string& line) {
  std::ofstream(".harvest/demo-effects.log", std::ios::app) << line << "\n";
}

WorkflowRegistry workflows() {
  WorkflowRegistry r;
  r.add("onboarding", [](WorkflowContext& ctx, std::string user) {
    ctx.step("create_account", [&] {
      effect("create_account " + user);
      return "acct-" + user;
    });
    ctx.step("send_welcome_mail", [&] {
      effect("send_welcome_mail " + user);
      return true;
    });
    auto approval = ctx.wait_signal("approve", 10min);
    std::string by = approval ? approval->value("by", "?") : "nobody (timed out)";
    ctx.step("activate", [&] {
      effect("activate " + user + " approved by " + by);
      return true;
    });
    return fmt::format("{} onboarded, approved by {}", user, by);
  });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  EngineConfig config;
  config.profile = Profile::kDev;  // private cluster if no URL; migrations applied
  auto engine = Engine::open(config, workflows());
  if (!engine) {
    std::cerr << "cannot open harvest: " << engine.error().message << "\n";
    return 1;
  }
  Engine& e = **engine;
  if (cmd == "start") {
    auto r = e.start({.workflow = "onboarding", .workflow_id = "user-42", .input = "user-42"});
    if (!r) {
      std::cerr << r.error().describe() << "\n";
      return 1;
    }
    fmt::print("{} execution {}\n", to_string(r->kind), r->execution_id.value_or("-"));
    return 0;
  }
  auto id = e.find_execution("onboarding", "user-42");
  if (!id || !*id) {
    std::cerr << "no execution for user-42: run `engine_demo start` first\n";
    return 1;
  }
  if (cmd == "work") {
    std::string until = argc > 2 ? argv[2] : "completed";
    Worker worker(e, {.concurrency = 1, .lease = 2s, .poll_interval = 50ms});
    worker.start();
    for (int i = 0; i < 600; ++i) {
      auto v = e.get_execution(**id);
      if (v && v->status == until) {
        fmt::print("execution {} is {}\n", **id, v->status);
        return 0;
      }
      std::this_thread::sleep_for(50ms);
    }
    std::cerr << "timed out waiting for status " << until << "\n";
    return 1;
  }
  if (cmd == "signal") {
    auto r = e.signal({.target = {.execution_id = **id},
                       .name = "approve",
                       .payload = {{"by", "alice"}},
                       .idempotency_key = "approve-user-42"});
    if (!r) {
      std::cerr << r.error().describe() << "\n";
      return 1;
    }
    fmt::print("signal approve {}\n",
               r->kind == SignalOutcomeKind::kDelivered ? "delivered" : "duplicate");
    return 0;
  }
  if (cmd == "show") {
    auto v = e.get_execution(**id);
    if (!v) return 1;
    fmt::print("execution {} status={} output={}\n", v->id, v->status, v->output.dump());
    for (const auto& h : v->history) {
      fmt::print("  {:>3}  {:<18} {}\n", h.id, h.kind, h.name.value_or(""));
    }
    return 0;
  }
  std::cerr << "usage: engine_demo start | work <status> | signal | show\n";
  return 2;
}
