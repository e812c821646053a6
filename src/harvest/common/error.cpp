#include <fmt/format.h>

#include <harvest/common/error.hpp>

namespace harvest {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return "bad_request";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kInvalidInput:
      return "invalid_input";
    case ErrorKind::kConflict:
      return "conflict";
    case ErrorKind::kTransient:
      return "transient";
    case ErrorKind::kConfig:
      return "config";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string_view to_string(RetryClass retry) {
  switch (retry) {
    case RetryClass::kPermanent:
      return "permanent";
    case RetryClass::kTransient:
      return "transient";
    case RetryClass::kUnavailable:
      return "unavailable";
    case RetryClass::kConfig:
      return "config";
  }
  return "unknown";
}

std::string Error::describe() const {
  if (detail.empty()) return fmt::format("{}: {}", to_string(kind), message);
  return fmt::format("{}: {} [{}]", to_string(kind), message, detail);
}

}  // namespace harvest
