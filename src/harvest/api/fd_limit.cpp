#include <sys/resource.h>

#include <algorithm>

#include <harvest/api/fd_limit.hpp>
#include <harvest/common/log.hpp>

namespace harvest::api {

// max_connections open sockets need as many descriptors, plus the
// database connections and files beside them: the soft RLIMIT_NOFILE is
// raised up to the hard one when it is lower (it is 1024 under many service
// managers), and a limit still too low is logged, naming the setting.
void ensure_descriptors(size_t max_connections) {
  constexpr rlim_t kBeside = 256;
  const rlim_t want = static_cast<rlim_t>(max_connections) + kBeside;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= want) return;
  const rlim_t soft = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
  if (soft > lim.rlim_cur) {
    rlimit raised{soft, lim.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim.rlim_cur = soft;
  }
  if (lim.rlim_cur < want) {
    log::warn(
        "the process may open {} files (RLIMIT_NOFILE, hard limit {}), fewer than the {} "
        "that ApiConfig::max_connections {} needs with room for its database connections: "
        "past that, idle connections are closed to accept new ones",
        static_cast<unsigned long long>(lim.rlim_cur),
        static_cast<unsigned long long>(lim.rlim_max), static_cast<unsigned long long>(want),
        max_connections);
  }
}

}  // namespace harvest::api
