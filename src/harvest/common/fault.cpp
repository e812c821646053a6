#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include <harvest/common/fault.hpp>
#include <harvest/common/log.hpp>

namespace harvest::fault {

namespace {

struct Armed {
  Action action;
  int skip;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Armed, std::less<>> armed;
  std::map<std::string, int, std::less<>> fired;
  std::atomic<bool> any{false};

  Registry() {
    // HARVEST_FAULT_POINTS=name=kill,name2=throw
    if (const char* env = std::getenv("HARVEST_FAULT_POINTS")) {
      std::string spec = env;
      size_t pos = 0;
      while (pos < spec.size()) {
        size_t comma = spec.find(',', pos);
        std::string item =
            spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t eq = item.find('=');
        if (eq != std::string::npos) {
          armed[item.substr(0, eq)] = {
              item.substr(eq + 1) == "throw" ? Action::kThrow : Action::kKill, 0};
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      any = !armed.empty();
    }
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void arm(std::string_view point, Action action, int hits_before_firing) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.armed[std::string(point)] = {action, hits_before_firing};
  r.any = true;
}

void disarm_all() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.armed.clear();
  r.any = false;
}

int fired(std::string_view point) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.fired.find(point);
  return it == r.fired.end() ? 0 : it->second;
}

bool any_armed() {
  return registry().any.load(std::memory_order_relaxed);
}

void hit(std::string_view point) {
  auto& r = registry();
  Action action;
  {
    std::lock_guard lock(r.mu);
    auto it = r.armed.find(point);
    if (it == r.armed.end()) return;
    if (it->second.skip > 0) {
      --it->second.skip;
      return;
    }
    action = it->second.action;
    r.armed.erase(it);
    r.any = !r.armed.empty();
    ++r.fired[std::string(point)];
  }
  log::warn("fault point {} fired", point);
  if (action == Action::kKill) {
    log::logger().flush();
    ::kill(::getpid(), SIGKILL);
  }
  throw InjectedCrash(std::string(point));
}

}  // namespace harvest::fault
