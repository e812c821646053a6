// What one benchmark case cost the machine, in figures that do not move with
// the noise of a shared box: WAL bytes written, table rows written
// (inserted + updated + deleted, from pg_stat_user_tables of the bench
// database) and CPU time of this process plus every PostgreSQL process, each
// per message. A throughput figure halves when a neighbour takes a core; these
// do not.
//
// Usage: `auto f = Footprint::begin(db);` once the case's input is in place,
// then `f.end(db, messages)` once its work is durable. Both read PostgreSQL
// through `db`, a plain connection to the bench database on this machine
// (the server's processes are read from /proc).
#pragma once

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <harvest/store/pg.hpp>

namespace harvest::bench {

/// Per-message figures of one case (see the file comment).
struct Figures {
  double wal_bytes_per_msg = 0;
  double rows_per_msg = 0;
  double cpu_us_per_msg = 0;
};

class Footprint {
 public:
  static Footprint begin(store::Connection& db) {
    Footprint f;
    f.wal_ = text(db, "SELECT pg_current_wal_lsn()::text");
    f.rows_ = settled_rows(db);
    f.postmaster_ = postmaster_pid(db);
    f.cpu_us_ = cpu_us(f.postmaster_);
    return f;
  }

  /// The figures since begin(), per message of `msgs`.
  Figures end(store::Connection& db, size_t msgs) const {
    const double cpu = cpu_us(postmaster_) - cpu_us_;
    const double rows = settled_rows(db) - rows_;
    const double wal = std::stod(
        text(db, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '" + wal_ + "'::pg_lsn)::text"));
    const double n = msgs > 0 ? static_cast<double>(msgs) : 1.0;
    return Figures{wal / n, rows / n, cpu / n};
  }

 private:
  static std::string text(store::Connection& db, const std::string& sql) {
    auto r = db.exec(sql);
    if (!r || r->empty()) {
      std::fprintf(stderr, "footprint: %s failed\n", sql.c_str());
      std::exit(1);
    }
    return r->get(0, 0);
  }

  // Rows written so far. Backends publish their counters once idle, at most
  // once a second, so this first lets 2 s pass, then waits until two reads a
  // second apart agree (at most 12 s more).
  static double settled_rows(store::Connection& db) {
    const std::string sql =
        "SELECT (coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0))::text "
        "FROM pg_stat_user_tables";
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the backends go idle and publish
    (void)db.exec("SELECT pg_stat_clear_snapshot()");
    double last = std::stod(text(db, sql));
    for (int i = 0; i < 12; ++i) {
      std::this_thread::sleep_for(std::chrono::seconds(1));  // the stats flush interval
      (void)db.exec("SELECT pg_stat_clear_snapshot()");
      const double now = std::stod(text(db, sql));
      if (now == last) break;
      last = now;
    }
    return last;
  }

  static long postmaster_pid(store::Connection& db) {
    const long backend = std::stol(text(db, "SELECT pg_backend_pid()::text"));
    long ppid = 0;
    (void)proc_times(backend, &ppid);
    return ppid;
  }

  // utime + stime (+ cutime + cstime with `children`) of `pid` in clock
  // ticks; its parent's pid into `ppid`. 0 when the process is gone.
  static double proc_times(long pid, long* ppid, bool children = false) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line)) return 0;
    // The command name may hold spaces: fields resume after its ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 17 && rest >> field; ++i) {
      if (i == 4 && ppid) *ppid = std::stol(field);
      if (i == 14 || i == 15 || (children && (i == 16 || i == 17))) ticks += std::stod(field);
    }
    return ticks;
  }

  // CPU of this process and of the PostgreSQL server (its postmaster, the
  // exited backends it reaped, and every live child), in microseconds.
  static double cpu_us(long postmaster) {
    rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    double us = self.ru_utime.tv_sec * 1e6 + self.ru_utime.tv_usec + self.ru_stime.tv_sec * 1e6 +
                self.ru_stime.tv_usec;
    double ticks = proc_times(postmaster, nullptr, /*children=*/true);
    if (DIR* d = ::opendir("/proc")) {
      while (dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') continue;
        long parent = 0;
        const double t = proc_times(pid, &parent);
        if (parent == postmaster) ticks += t;
      }
      ::closedir(d);
    }
    return us + ticks * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  std::string wal_;
  double rows_ = 0;
  long postmaster_ = 0;
  double cpu_us_ = 0;
};

}  // namespace harvest::bench
