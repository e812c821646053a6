// The `harvest` command line, as a library so tests can drive it.
#pragma once

#include <ostream>

namespace harvest::cli {

// Runs the CLI with argv-style arguments, writing to `out`/`err`. Returns the
// process exit code: 0 success, 1 operational failure, 2 usage error.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace harvest::cli
