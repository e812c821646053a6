// Freezing the shared test broker (SIGSTOP) for tests of a degraded broker.
// Tests that use it must run serially (RUN_SERIAL in CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <harvest/common/error.hpp>

namespace harvest::kafka::testing {

// The broker's pid from the state dir of scripts/services/kafka.sh:
// ${HARVEST_KAFKA_DIR:-/tmp/harvest-kafka-$PORT}/kafka.pid.
inline Result<pid_t> broker_pid(const std::string& bootstrap) {
  std::string dir;
  if (const char* env = std::getenv("HARVEST_KAFKA_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    const auto colon = bootstrap.rfind(':');
    const std::string port = colon == std::string::npos ? "9092" : bootstrap.substr(colon + 1);
    dir = "/tmp/harvest-kafka-" + port;
  }
  std::ifstream in(dir + "/kafka.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 1) {
    return fail(Error::config("cannot read the broker pid from " + dir +
                              "/kafka.pid: this test needs the broker started by "
                              "scripts/services/kafka.sh (set HARVEST_KAFKA_DIR if it uses a "
                              "non-default state dir)"));
  }
  return static_cast<pid_t>(pid);
}

// SIGSTOPs the broker; SIGCONTs it when thawed or destroyed, so a failing
// assertion can never leave the shared broker frozen.
class FrozenBroker {
 public:
  explicit FrozenBroker(pid_t pid) : pid_(pid) {
    if (::kill(pid_, SIGSTOP) != 0) {
      ADD_FAILURE() << "kill -STOP " << pid_ << ": " << std::strerror(errno);
      pid_ = 0;
    }
  }
  ~FrozenBroker() { thaw(); }
  FrozenBroker(const FrozenBroker&) = delete;
  FrozenBroker& operator=(const FrozenBroker&) = delete;

  void thaw() {
    if (pid_ == 0) return;
    if (::kill(pid_, SIGCONT) != 0) {
      ADD_FAILURE() << "kill -CONT " << pid_ << ": " << std::strerror(errno);
    }
    pid_ = 0;
  }

 private:
  pid_t pid_;
};

}  // namespace harvest::kafka::testing
