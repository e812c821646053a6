// The process's open-file limit, sized for the HTTP server's connections.
// Internal to harvest_api.
#pragma once

#include <cstddef>

namespace harvest::api {

// Raises the soft RLIMIT_NOFILE (up to the hard limit) so max_connections
// sockets fit beside the database connections and files; warns, naming the
// setting, when the hard limit is lower.
void ensure_descriptors(size_t max_connections);

}  // namespace harvest::api
