// Logging: spdlog, one named logger per harvest process. Tests capture
// warnings through `LogCapture`.
#pragma once

#include <spdlog/spdlog.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace harvest::log {

// The process-wide harvest logger (created on first use; level from
// HARVEST_LOG_LEVEL, default "info").
spdlog::logger& logger();

// Every line passes through `redact_secrets` before it reaches a sink, so a
// connection string or AWS key quoted in any message is logged masked.
void write(spdlog::level::level_enum level, std::string_view message);

template <typename... Args>
void emit(spdlog::level::level_enum level, fmt::format_string<Args...> f, Args&&... args) {
  if (!logger().should_log(level)) return;
  write(level, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  emit(spdlog::level::info, f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  emit(spdlog::level::warn, f, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  emit(spdlog::level::err, f, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  emit(spdlog::level::debug, f, std::forward<Args>(args)...);
}

// Fields appended to every line this thread logs while alive, e.g.
// "execution=<id> trace_id=<32 hex>" while a worker thread runs a run, so a
// run's lines (harvest's and the workflow's own) carry its trace. Nested
// scopes add to the outer ones.
class ScopedFields {
 public:
  explicit ScopedFields(std::string_view fields);
  ~ScopedFields();
  ScopedFields(const ScopedFields&) = delete;
  ScopedFields& operator=(const ScopedFields&) = delete;

 private:
  size_t restore_;
};

// Records every message logged at `min_level` (default warn) or above while alive. Used by
// tests that assert a warning or error was reported, by content.
class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum min_level = spdlog::level::warn);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  [[nodiscard]] std::vector<std::string> messages() const;
  // True when some captured message contains every one of `needles`.
  [[nodiscard]] bool contains(std::initializer_list<std::string_view> needles) const;
  [[nodiscard]] size_t count_containing(std::string_view needle) const;
  void clear();

 private:
  struct Sink;
  std::shared_ptr<Sink> sink_;
};

}  // namespace harvest::log
