// Engine: retention (ENG-10) — deletes terminal runs past their age, with
// their history and signals, and start-idempotency claims past their window.
#include <harvest/common/log.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine {

Result<int> Engine::purge() {
  long long deleted = 0;
  const auto& retention = config_.retention;
  std::vector<std::string> overridden;
  for (const auto& [workflow, age] : retention.per_workflow) overridden.push_back(workflow);
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    auto conn = pool(shard).acquire();
    if (!conn) {
      // Retention on the reachable shards goes on; this one is purged next time.
      log::warn("retention purge skipped shard {}: {}", shard, conn.error().describe());
      continue;
    }
    ExecutionStore store(**conn);
    long long here = 0;
    for (const auto& [workflow, age] : retention.per_workflow) {
      auto n = store.purge_terminal(workflow, {}, age);
      if (!n) return fail(n.error());
      here += *n;
    }
    if (retention.max_age) {
      auto n = store.purge_terminal(std::nullopt, overridden, *retention.max_age);
      if (!n) return fail(n.error());
      here += *n;
    }
    auto claims = store.purge_expired_claims();
    if (!claims) return fail(claims.error());
    if (here > 0 || *claims > 0) {
      log::info("retention purged {} terminal executions and {} expired start claims on shard {}",
                here, *claims, shard);
    }
    deleted += here;
  }
  return static_cast<int>(deleted);
}

}  // namespace harvest::engine
