// Error values shared by every harvest module.
//
// Expected failures travel as `Result<T>` (`std::expected<T, Error>`). Every
// error carries two answers:
// - its `RetryClass`, the one thing a retry loop needs to know: permanent
//   (retrying the same request cannot succeed: dead-letter it, answer 4xx),
//   transient (may succeed later: retry with back-off, answer 503),
//   unavailable (a transient failure because the store itself cannot be
//   reached: nothing about the request is wrong, and every other request
//   fails the same way until it answers again) or config (misconfiguration:
//   refuse at build or start). `should_retry()` is the only place anyone asks
//   "retry this?"; `is_unavailable()` tells a caller to wait for the store
//   rather than blame the request;
// - its `ErrorKind`, the detail a caller maps to a status code (400, 404, …).
// Adapters translate their library's codes (SQLSTATEs, librdkafka and curl
// codes) into these inside their own module; no library code crosses a module
// boundary.
//
// `message` is written for whoever sent the request and may be shown to them.
// It never holds SQL, a SQLSTATE, a server's own error text or a credential:
// those go to `detail`, which is for the log only.
#pragma once

#include <expected>
#include <stdexcept>
#include <string>
#include <string_view>

namespace harvest {

enum class RetryClass {
  kPermanent,    ///< never retry: dead-letter the message / answer 4xx (or 500 for a bug)
  kTransient,    ///< retry with back-off (503): pool exhausted, serialization failure, broker down
  kUnavailable,  ///< retry once the store is back (503): connection refused or lost, shutting down
  kConfig,       ///< refuse at build/start: the configuration is wrong
};

enum class ErrorKind {
  kBadRequest,    ///< caller-supplied arguments are invalid (HTTP 400)
  kNotFound,      ///< unknown workflow / execution (HTTP 404)
  kInvalidInput,  ///< input does not deserialise to the workflow's type (HTTP 422)
  kConflict,      ///< the request contradicts the stored state (HTTP 409)
  kTransient,     ///< retry later: database unavailable, pool exhausted (HTTP 503)
  kConfig,        ///< misconfiguration discovered at run time
  kInternal,      ///< a bug or an unexpected answer from a dependency (HTTP 500)
};

[[nodiscard]] std::string_view to_string(ErrorKind kind);
[[nodiscard]] std::string_view to_string(RetryClass retry);

/// The retry class an error of `kind` has unless its origin says otherwise.
[[nodiscard]] constexpr RetryClass default_retry_class(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTransient:
      return RetryClass::kTransient;
    case ErrorKind::kConfig:
      return RetryClass::kConfig;
    default:
      return RetryClass::kPermanent;
  }
}

/// An expected failure, carried as the error side of `Result`: what went wrong
/// (`kind`), whether retrying can help (`retry`), a `message` fit for the caller
/// and a `detail` for the log. A plain value: copy and move it freely.
struct Error {
  /// What went wrong, mapped by callers to a status code. Default kInternal.
  ErrorKind kind = ErrorKind::kInternal;
  /// For the caller: what was wrong and, where it helps, what to do.
  std::string message;
  /// For the log only (never a response): the originating system's own words,
  /// e.g. PostgreSQL's error text with its SQLSTATE.
  std::string detail = {};
  /// Whether a retry can help; read it through should_retry() / is_unavailable().
  /// Default: default_retry_class(kind) (unavailable() sets kUnavailable).
  RetryClass retry = default_retry_class(kind);

  /// message, then detail in brackets when there is one: for log lines.
  [[nodiscard]] std::string describe() const;

  /// kBadRequest (400), permanent: the caller's arguments are invalid.
  static Error bad_request(std::string m) { return {ErrorKind::kBadRequest, std::move(m)}; }
  /// kNotFound (404), permanent: no such workflow or execution.
  static Error not_found(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
  /// kInvalidInput (422), permanent: the input does not fit the workflow's type.
  static Error invalid_input(std::string m) { return {ErrorKind::kInvalidInput, std::move(m)}; }
  /// kConflict (409), permanent: the request contradicts the stored state.
  static Error conflict(std::string m) { return {ErrorKind::kConflict, std::move(m)}; }
  /// kTransient (503), retry class kTransient: may succeed on a later retry.
  static Error transient_error(std::string m) { return {ErrorKind::kTransient, std::move(m)}; }
  /// The store cannot be reached: transient, retry class kUnavailable.
  static Error unavailable(std::string m, std::string detail = {}) {
    return {ErrorKind::kTransient, std::move(m), std::move(detail), RetryClass::kUnavailable};
  }
  /// kConfig, retry class kConfig: misconfiguration found at run time.
  static Error config(std::string m) { return {ErrorKind::kConfig, std::move(m)}; }
  /// kInternal (500), permanent: a bug or an unexpected answer from a dependency.
  static Error internal(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }
};

/// The one answer to "retry this?": true only for transient errors (the store
/// being unavailable included).
[[nodiscard]] inline bool should_retry(const Error& e) {
  return e.retry == RetryClass::kTransient || e.retry == RetryClass::kUnavailable;
}
/// The store itself cannot be reached: every request fails alike until it is
/// back, so wait for it rather than count this against the request.
[[nodiscard]] inline bool is_unavailable(const Error& e) {
  return e.retry == RetryClass::kUnavailable;
}
[[nodiscard]] inline bool is_permanent(const Error& e) {
  return e.retry == RetryClass::kPermanent;
}

template <typename T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(Error e) {
  return std::unexpected<Error>(std::move(e));
}

/// Thrown only at build/configuration time (plugin build, runtime construction):
/// the message names what is wrong and how to fix it.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace harvest
