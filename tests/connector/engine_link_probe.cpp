// Links the engine and nothing else, so its transitive link graph can be
// inspected (CON-1).
#include <harvest/engine/engine.hpp>

int main() {
  harvest::engine::WorkflowRegistry r;
  return r.names().empty() ? 0 : 1;
}
