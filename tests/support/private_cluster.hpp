// Test support: a PostgreSQL cluster of the test's own (initdb into a
// temporary directory, on a free loopback port), for tests that crash the
// store — the shared test cluster cannot be stopped under the other tests.
// The destructor stops it in immediate mode and removes its directory.
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <harvest/store/dev_cluster.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::testing {

// A port nothing listens on now: the kernel's pick for an ephemeral bind.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

class PrivateCluster {
 public:
  // `name` makes the directory's name (plus a random suffix).
  explicit PrivateCluster(const std::string& name)
      : dir_(std::filesystem::temp_directory_path() /
             (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(free_port()))) {
    namespace fs = std::filesystem;
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    config_ = store::DevClusterConfig{dir_ / "pg", free_port()};
  }
  ~PrivateCluster() {
    (void)pg_ctl("-m immediate stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateCluster(const PrivateCluster&) = delete;
  PrivateCluster& operator=(const PrivateCluster&) = delete;

  // Creates (the first time) and starts it; its URL, or an error.
  Result<std::string> start() {
    auto url = store::ensure_dev_cluster(config_);
    if (url) url_ = *url;
    return url;
  }
  // Stops it as a crash would: no shutdown checkpoint, every connection cut.
  bool crash() { return pg_ctl("-m immediate stop"); }
  [[nodiscard]] const std::string& url() const { return url_; }

  // A count on it; -1 while it cannot answer.
  [[nodiscard]] long long count(const std::string& sql) const {
    auto conn = store::Connection::open(url_);
    if (!conn) return -1;
    auto r = (*conn)->exec(sql);
    return r && !r->empty() ? std::stoll(r->get(0, 0)) : -1;
  }

  // Runs pg_ctl on it (as its owner); true on success.
  bool pg_ctl(const std::string& action) const {
    auto bindir = store::postgres_bindir();
    if (!bindir) return false;
    const std::string cmd = fmt::format(
        "{}{} -D {} -w {} >/dev/null 2>&1", ::geteuid() == 0 ? "runuser -u postgres -- " : "",
        (*bindir / "pg_ctl").string(), config_.data_dir.string(), action);
    return std::system(cmd.c_str()) == 0;
  }

 private:
  std::filesystem::path dir_;
  store::DevClusterConfig config_;
  std::string url_;
};

}  // namespace harvest::testing
