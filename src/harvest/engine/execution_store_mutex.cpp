// ExecutionStore: the durable mutex (ENG-20). A name's queue is its rows in
// harvest_mutex_queue, in seq order; the holder is the first row whose run
// is still open. Each call takes the name's advisory lock first, in the same
// implicit transaction, so queueing, granting and releasing a name happen
// one at a time and in commit order: a row's seq order is its queue order,
// and a release that commits before a waiter's check is seen by that check,
// while one that commits after it wakes that waiter.
#include <harvest/engine/execution_store.hpp>
#include <harvest/engine/sql/mutex.hpp>

namespace harvest::engine {

Result<bool> ExecutionStore::enqueue_lock(const Fence& fence, const std::string& name) {
  auto r = conn_.exec_pipeline({{sql::mutex::name_lock, {name}},
                                {sql::mutex::enqueue, {fence.execution_id, fence.lease, name}}});
  if (!r) return fail(r.error());
  return r->back().get_bool(0, "fenced");
}

Result<bool> ExecutionStore::try_grant_lock(const std::string& execution_id,
                                            const std::string& name) {
  auto r = conn_.exec_pipeline(
      {{sql::mutex::name_lock, {name}}, {sql::mutex::try_grant, {name, execution_id}}});
  if (!r) return fail(r.error());
  return !r->back().empty();
}

Result<bool> ExecutionStore::release_lock(const Fence& fence, const std::string& name) {
  auto r = conn_.exec_pipeline({{sql::mutex::name_lock, {name}},
                                {sql::mutex::release, {fence.execution_id, fence.lease, name}},
                                {sql::mutex::wake_next, {name}}});
  if (!r) return fail(r.error());
  return (*r)[1].get_bool(0, "fenced");
}

Result<int> ExecutionStore::sweep_locks() {
  auto names = conn_.exec(sql::mutex::abandoned_names);
  if (!names) return fail(names.error());
  for (int i = 0; i < names->rows(); ++i) {
    const std::string name = names->get(i, "name");
    auto r = conn_.exec_pipeline({{sql::mutex::name_lock, {name}},
                                  {sql::mutex::drop_closed, {name}},
                                  {sql::mutex::wake_next, {name}}});
    if (!r) return fail(r.error());
  }
  return names->rows();
}

}  // namespace harvest::engine
