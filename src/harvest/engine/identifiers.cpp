#include <fmt/format.h>

#include <harvest/common/ids.hpp>
#include <harvest/engine/identifiers.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::engine {

Status check_identifier(std::string_view field, std::string_view value, size_t max) {
  if (value.empty()) return fail(Error::bad_request(fmt::format("{} must not be empty", field)));
  if (value.size() > max) {
    return fail(Error::bad_request(
        fmt::format("{} is {} bytes long; the limit is {} bytes", field, value.size(), max)));
  }
  if (auto nul = value.find('\0'); nul != std::string_view::npos) {
    return fail(Error::bad_request(fmt::format(
        "{} contains a NUL byte at offset {}; identifiers cannot contain NUL", field, nul)));
  }
  if (!is_valid_utf8(value)) {
    return fail(Error::bad_request(fmt::format("{} is not valid UTF-8", field)));
  }
  return {};
}

Status check_identifier_if_set(std::string_view field, const std::optional<std::string>& value,
                               size_t max) {
  if (!value) return {};
  return check_identifier(field, *value, max);
}

Result<std::optional<std::string>> concurrency_key_for(
    const WorkflowDef& def, const nlohmann::json& input,
    const std::optional<std::string>& workflow_id) {
  if (!def.options.concurrency) return std::optional<std::string>{};
  std::string key;
  try {
    key = def.options.concurrency->key(input, workflow_id);
  } catch (const std::exception& e) {
    return fail(Error::bad_request(
        fmt::format("the concurrency key function of workflow '{}' failed on this input: {}",
                    def.name, to_valid_utf8(e.what()))));
  } catch (...) {
    return fail(Error::bad_request(fmt::format(
        "the concurrency key function of workflow '{}' failed on this input", def.name)));
  }
  if (auto ok = check_identifier(fmt::format("the concurrency key of workflow '{}'", def.name), key,
                                 IdentifierLimits::kConcurrencyKey);
      !ok) {
    return fail(ok.error());
  }
  return std::optional<std::string>{std::move(key)};
}

}  // namespace harvest::engine
