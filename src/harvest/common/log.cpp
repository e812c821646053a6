#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cstdlib>

#include <harvest/common/log.hpp>
#include <harvest/common/redact.hpp>

namespace harvest::log {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("harvest");
    const char* level = std::getenv("HARVEST_LOG_LEVEL");
    l->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [harvest] %v");
    return l;
  }();
  return *instance;
}

namespace {
thread_local std::string scoped_fields;  // " a=b c=d", or empty
}  // namespace

ScopedFields::ScopedFields(std::string_view fields) : restore_(scoped_fields.size()) {
  scoped_fields.append(" ").append(fields);
}
ScopedFields::~ScopedFields() {
  scoped_fields.resize(restore_);
}

void write(spdlog::level::level_enum level, std::string_view message) {
  if (scoped_fields.empty()) {
    logger().log(level, "{}", redact_secrets(message));
  } else {
    logger().log(level, "{}{}", redact_secrets(message), scoped_fields);
  }
}

struct LogCapture::Sink : spdlog::sinks::base_sink<std::mutex> {
  explicit Sink(spdlog::level::level_enum min) : min_level(min) {}
  spdlog::level::level_enum min_level;
  std::vector<std::string> lines;
  mutable std::mutex read_mu;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level < min_level) return;
    std::lock_guard lock(read_mu);
    lines.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}
};

LogCapture::LogCapture(spdlog::level::level_enum min_level)
    : sink_(std::make_shared<Sink>(min_level)) {
  logger().sinks().push_back(sink_);
}

LogCapture::~LogCapture() {
  auto& sinks = logger().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
}

std::vector<std::string> LogCapture::messages() const {
  std::lock_guard lock(sink_->read_mu);
  return sink_->lines;
}

bool LogCapture::contains(std::initializer_list<std::string_view> needles) const {
  for (const auto& line : messages()) {
    bool all = std::all_of(needles.begin(), needles.end(),
                           [&](std::string_view n) { return line.find(n) != std::string::npos; });
    if (all) return true;
  }
  return false;
}

size_t LogCapture::count_containing(std::string_view needle) const {
  auto lines = messages();
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(needle) != std::string::npos; });
}

void LogCapture::clear() {
  std::lock_guard lock(sink_->read_mu);
  sink_->lines.clear();
}

}  // namespace harvest::log
