// Limits on every identifier harvest stores (hardening: identifier limits).
//
// Each identifier is checked where it enters the engine, before any SQL: it
// must be valid UTF-8, free of NUL bytes (which libpq would silently
// truncate: "x\0A" and "x\0B" must not become one run "x") and no longer than
// its documented maximum, which keeps every index row far below PostgreSQL's
// btree limit (about 2.7 KB). A violation is a permanent kBadRequest naming
// the field and the limit: 400 over HTTP, a dead letter with that reason on a
// broker.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include <harvest/common/error.hpp>

namespace harvest::engine {

struct IdentifierLimits {
  static constexpr size_t kWorkflowName = 200;    // registered workflow names
  static constexpr size_t kWorkflowId = 512;      // business identity of a run
  static constexpr size_t kIdempotencyKey = 512;  // start and signal keys
  static constexpr size_t kSignalName = 200;
  static constexpr size_t kSourceRef = 1024;  // provenance (rendered broker coordinates)
  static constexpr size_t kConcurrencyKey = 512;
};

// kBadRequest when `value` is empty, longer than `max` bytes, holds a NUL or
// is not valid UTF-8; `field` names it in the message ("workflow_id").
[[nodiscard]] Status check_identifier(std::string_view field, std::string_view value, size_t max);
// The same check when `value` is set; an unset value passes.
[[nodiscard]] Status check_identifier_if_set(std::string_view field,
                                             const std::optional<std::string>& value, size_t max);

struct WorkflowDef;

// ENG-19: the concurrency key of a run of `def` with this input and workflow
// id; std::nullopt for a workflow without a ConcurrencyPolicy. kBadRequest
// naming the workflow when the key function throws or its key breaks the
// identifier limits.
[[nodiscard]] Result<std::optional<std::string>> concurrency_key_for(
    const WorkflowDef& def, const nlohmann::json& input,
    const std::optional<std::string>& workflow_id);

}  // namespace harvest::engine
