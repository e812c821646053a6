// Error values shared by every harvest module.
//
// Expected failures travel as `Result<T>` (`std::expected<T, Error>`). The
// `ErrorKind` is the retry policy: a transient error may succeed if retried
// (database down, pool exhausted), every other kind will not.
#pragma once

#include <expected>
#include <stdexcept>
#include <string>
#include <string_view>

namespace harvest {

enum class ErrorKind {
  kBadRequest,    // caller-supplied arguments are invalid (HTTP 400)
  kNotFound,      // unknown workflow / execution (HTTP 404)
  kInvalidInput,  // input does not deserialise to the workflow's type (HTTP 422)
  kConflict,      // the request contradicts the stored state (HTTP 409)
  kTransient,     // retry later: database unavailable, pool exhausted (HTTP 503)
  kConfig,        // misconfiguration discovered at run time
  kInternal,      // a bug or an unexpected database answer
};

[[nodiscard]] std::string_view to_string(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  // The originating system's own code where one helps callers decide (a
  // PostgreSQL SQLSTATE such as "23505"); empty otherwise.
  std::string code = {};

  [[nodiscard]] bool transient() const { return kind == ErrorKind::kTransient; }
  // Permanent errors are the caller's or the message's fault: retrying the same
  // request cannot succeed.
  [[nodiscard]] bool permanent() const {
    return kind == ErrorKind::kBadRequest || kind == ErrorKind::kNotFound ||
           kind == ErrorKind::kInvalidInput || kind == ErrorKind::kConflict;
  }
  [[nodiscard]] std::string describe() const;

  static Error bad_request(std::string m) { return {ErrorKind::kBadRequest, std::move(m)}; }
  static Error not_found(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
  static Error invalid_input(std::string m) { return {ErrorKind::kInvalidInput, std::move(m)}; }
  static Error conflict(std::string m) { return {ErrorKind::kConflict, std::move(m)}; }
  static Error transient_error(std::string m) { return {ErrorKind::kTransient, std::move(m)}; }
  static Error config(std::string m) { return {ErrorKind::kConfig, std::move(m)}; }
  static Error internal(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }
};

template <typename T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(Error e) {
  return std::unexpected<Error>(std::move(e));
}

// Thrown only at build/configuration time (plugin build, runtime construction):
// the message names what is wrong and how to fix it.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace harvest
