// Test support for the engine's run-level tests (cancel and terminate, mutex): a run's
// status, waiting for one, and the kinds of its history in order.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/pg_fixture.hpp"
#include <harvest/engine/engine.hpp>

namespace harvest::engine::testing {

class RunTest : public harvest::testing::PgTest {
 protected:
  std::string status_of(const std::string& id) {
    return text(::harvest::testing::kStatusById, {id});
  }
  bool wait_status(const std::string& id, const std::string& status,
                   std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return eventually([&] { return status_of(id) == status; }, timeout);
  }
  // The kinds of the run's history, oldest first, as the engine reads them.
  std::vector<std::string> kinds(Engine& e, const std::string& id) {
    auto view = e.get_execution(id);
    EXPECT_TRUE(view);
    std::vector<std::string> out;
    if (view) {
      for (const auto& h : view->history) out.push_back(h.kind);
    }
    return out;
  }
};

}  // namespace harvest::engine::testing
