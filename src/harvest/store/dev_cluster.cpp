#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include <harvest/common/log.hpp>
#include <harvest/store/dev_cluster.hpp>
#include <harvest/store/pg.hpp>

namespace harvest::store {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int run(const std::string& cmd) {
  log::debug("dev cluster: {}", cmd);
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

Result<fs::path> postgres_bindir() {
  std::vector<fs::path> candidates;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    candidates.push_back(entry.path() / "bin");
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  for (const auto& c : candidates) {
    if (fs::exists(c / "initdb") && fs::exists(c / "pg_ctl")) return c;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t pos = 0;
    while (pos <= p.size()) {
      size_t colon = p.find(':', pos);
      fs::path dir = p.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (fs::exists(dir / "initdb") && fs::exists(dir / "pg_ctl")) return dir;
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  return fail(Error::config(
      "PostgreSQL server binaries (initdb, pg_ctl) not found: install the 'postgresql' package "
      "or set HARVEST_DATABASE_URL"));
}

Result<std::string> ensure_dev_cluster(DevClusterConfig config) {
  if (config.data_dir.empty()) {
    const char* env = std::getenv("HARVEST_DATA_DIR");
    config.data_dir = env ? fs::path(env) : fs::current_path() / ".harvest" / "pg";
  }
  if (config.port == 0) {
    const char* env = std::getenv("HARVEST_DEV_PG_PORT");
    config.port = env ? std::atoi(env) : 54329;
  }
  auto bindir = postgres_bindir();
  if (!bindir) return fail(bindir.error());
  config.data_dir = fs::absolute(config.data_dir);
  const bool as_root = ::geteuid() == 0;
  const std::string dir = config.data_dir.string();
  auto as_owner = [&](const std::string& cmd) {
    return as_root ? fmt::format("runuser -u postgres -- {}", cmd) : cmd;
  };

  if (!fs::exists(config.data_dir / "PG_VERSION")) {
    log::info("creating private PostgreSQL cluster in {}", dir);
    std::error_code ec;
    fs::create_directories(config.data_dir, ec);
    if (ec) return fail(Error::config(fmt::format("cannot create {}: {}", dir, ec.message())));
    if (as_root && run(fmt::format("chown -R postgres:postgres {}", shell_quote(dir))) != 0) {
      return fail(Error::config("cannot hand " + dir + " to the postgres user"));
    }
    std::string cmd =
        as_owner(fmt::format("{} -D {} -U harvest --auth=trust -E UTF8 --no-locale >{} 2>&1",
                             shell_quote((*bindir / "initdb").string()), shell_quote(dir),
                             shell_quote(dir + ".initdb.log")));
    if (run(cmd) != 0) {
      return fail(Error::config(fmt::format("initdb failed; see {}.initdb.log", dir)));
    }
  }

  std::string status =
      as_owner(fmt::format("{} -D {} status >/dev/null 2>&1",
                           shell_quote((*bindir / "pg_ctl").string()), shell_quote(dir)));
  if (run(status) != 0) {
    log::info("starting private PostgreSQL on 127.0.0.1:{} ({})", config.port, dir);
    std::string start = as_owner(fmt::format(
        "{} -D {} -w -t 60 -l {} -o {} start >/dev/null",
        shell_quote((*bindir / "pg_ctl").string()), shell_quote(dir),
        shell_quote(dir + "/server.log"),
        shell_quote(fmt::format("-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
                                config.port, dir))));
    if (run(start) != 0) {
      // Name the cause (a port in use, a stale lock file) without a second trip.
      std::ifstream log_file(dir + "/server.log");
      std::vector<std::string> lines;
      for (std::string line; std::getline(log_file, line);) lines.push_back(line);
      std::string tail;
      for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i) {
        tail += "\n  " + lines[i];
      }
      return fail(
          Error::config(fmt::format("pg_ctl start failed; {}/server.log ends with:{}", dir, tail)));
    }
  }

  std::string admin_url = fmt::format("postgresql://harvest@127.0.0.1:{}/postgres", config.port);
  auto admin = Connection::open(admin_url);
  if (!admin) return fail(admin.error());
  auto exists = (*admin)->exec("SELECT 1 FROM pg_database WHERE datname = 'harvest'");
  if (!exists) return fail(exists.error());
  if (exists->empty()) {
    if (auto r = (*admin)->exec("CREATE DATABASE harvest"); !r) return fail(r.error());
  }
  return fmt::format("postgresql://harvest@127.0.0.1:{}/harvest", config.port);
}

}  // namespace harvest::store
