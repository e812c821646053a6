// Deferred admission (ENG-8): throttle, debounce and batch. Internal to the
// engine. The SQL on the admission tables (harvest_admission_throttle,
// harvest_deferred_starts, harvest_debounce, harvest_batch_items) lives here;
// executions are created through ExecutionStore.
#pragma once

#include <harvest/common/error.hpp>
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/workflow.hpp>
#include <harvest/store/pool.hpp>

namespace harvest::engine::admission {

// Admits a start of `def` (which has an admission policy) inside the
// transaction open on `conn`: starts it now when its policy allows (Started,
// or IdempotentReplay of the run its workflow_id names), else queues it
// (Deferred). Errors: kBadRequest (a debounced start without workflow_id),
// or the store's.
[[nodiscard]] Result<StartOutcome> admit(store::Connection& conn, const WorkflowDef& def,
                                         const NewExecution& start);

// Fires what is due on one shard: throttled starts whose tokens freed,
// debounced starts gone quiet, batches full or old enough. Each workflow's
// firing is its own transaction. Returns the executions created.
[[nodiscard]] Result<int> fire_due(store::Pool& pool, const WorkflowRegistry& workflows);

}  // namespace harvest::engine::admission
