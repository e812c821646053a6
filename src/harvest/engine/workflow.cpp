// The workflow registry (ENG-3): names to definitions, fixed before the
// engine opens.
#include <fmt/format.h>

#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::engine {

WorkflowRegistry& WorkflowRegistry::add_def(WorkflowDef def) {
  if (def.name.empty()) throw ConfigError("a workflow needs a non-empty name");
  if (auto ok = check_identifier("workflow name", def.name, IdentifierLimits::kWorkflowName); !ok) {
    throw ConfigError(ok.error().message);
  }
  if (defs_.contains(def.name)) {
    throw ConfigError(fmt::format("workflow '{}' is registered twice", def.name));
  }
  if (!def.validate_input) def.validate_input = [](const Json&) { return std::nullopt; };
  std::string name = def.name;
  defs_.emplace(std::move(name), std::move(def));
  return *this;
}

const WorkflowDef* WorkflowRegistry::find(std::string_view name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : &it->second;
}

std::vector<std::string> WorkflowRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : defs_) out.push_back(k);
  return out;
}

}  // namespace harvest::engine
