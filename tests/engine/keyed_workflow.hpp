// The options of the `keyed` workflow of the per-key concurrency test
// (ENG-19), shared by the test (which starts its runs) and
// engine_worker_process (which runs them): key input["account"], 2 per key.
#pragma once

#include <harvest/engine/types.hpp>

namespace harvest::engine::testing {

inline WorkflowOptions keyed_options() {
  return WorkflowOptions{
      .concurrency = ConcurrencyPolicy{
          .key = [](const Json& input, const std::optional<std::string>&) -> std::string {
            return input.at("account").get<std::string>();
          },
          .max_per_key = 2}};
}

}  // namespace harvest::engine::testing
