// Named fault points for crash/ordering tests.
//
// Production code marks a spot with `HARVEST_FAULT_POINT("engine.after_step_recorded")`.
// Unarmed, a point costs one relaxed atomic load. A point is armed either by
// tests (`fault::arm(name, action)`) or for a whole process through the
// environment: `HARVEST_FAULT_POINTS=name=kill,other=throw`.
//   kill  - SIGKILL this process at once (a real crash: nothing is flushed)
//   throw - throw `fault::InjectedCrash`; the worker/runtime treats it as the
//           death of the component that hit it (no cleanup is written)
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace harvest::fault {

enum class Action { kKill, kThrow };

struct InjectedCrash : std::runtime_error {
  explicit InjectedCrash(const std::string& point)
      : std::runtime_error("injected crash at fault point " + point) {}
};

// Arms `point`; it fires on its next `hits_before_firing + 1`-th hit, then
// disarms itself.
void arm(std::string_view point, Action action, int hits_before_firing = 0);
void disarm_all();
// Number of times `point` fired since the process started.
[[nodiscard]] int fired(std::string_view point);

void hit(std::string_view point);
[[nodiscard]] bool any_armed();

}  // namespace harvest::fault

#define HARVEST_FAULT_POINT(name)                                   \
  do {                                                              \
    if (::harvest::fault::any_armed()) ::harvest::fault::hit(name); \
  } while (0)
