// ENG-18: a run that kills every worker that claims it is contained. A real
// worker process (engine_worker_process) is restarted after each crash, as a
// supervisor would; after poison_pill_threshold (3) crashes the run is
// failed into the engine's dead letters with reason crashed_worker, and the
// fourth process stays up.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.hpp"
#include "engine/engine.hpp"
#include "support/pg_fixture.hpp"

extern char** environ;

namespace harvest::engine {
namespace {

using namespace std::chrono_literals;

// One engine_worker_process child; SIGKILLed and reaped by the destructor if
// still running.
class WorkerProcess {
 public:
  WorkerProcess(const std::string& db, const std::string& instance) {
    std::vector<std::string> args{
        HARVEST_ENGINE_WORKER_PROCESS, "--db", db, "--instance-id", instance, "--seconds", "60"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn: " << std::strerror(rc);
      pid_ = 0;
    }
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Waits up to `within` for the process to end; its wait status, or
  // std::nullopt while it still runs.
  std::optional<int> wait_exit(std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return status;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(20ms);  // polling another process's exit
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = 0;
};

class PoisonPillTest : public testing::PgTest {};

TEST_F(PoisonPillTest, a_run_that_crashes_three_workers_is_dead_lettered_and_the_fourth_stays_up) {
  WorkflowRegistry r;
  r.add("aborts", [](WorkflowContext&, int) { return 0; });  // this process never runs it
  auto engine = open_engine(std::move(r));
  auto s = engine->start({.workflow = "aborts", .input = 1});
  ASSERT_TRUE(s);
  const std::string id = *s->execution_id;
  const std::string instance = "poison-" + new_uuid().substr(0, 8);

  for (int crash = 1; crash <= 3; ++crash) {
    WorkerProcess p(db_url(), instance);
    auto status = p.wait_exit(60s);
    ASSERT_TRUE(status) << "worker process " << crash << " did not crash on the run";
    ASSERT_TRUE(WIFSIGNALED(*status)) << "worker process " << crash << " exited normally";
    EXPECT_EQ(WTERMSIG(*status), SIGABRT);
    // The first claim was of a pending run; each later one a takeover.
    EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}),
              crash - 1);
    EXPECT_EQ(text("SELECT status FROM harvest_workflow_executions WHERE id = $1", {id}),
              "running");
  }

  WorkerProcess fourth(db_url(), instance);
  ASSERT_TRUE(eventually(
      [&] {
        return text("SELECT status FROM harvest_workflow_executions WHERE id = $1", {id}) ==
               "failed";
      },
      60s))
      << "the fourth worker did not contain the run";
  EXPECT_FALSE(fourth.wait_exit(500ms)) << "the fourth worker process died";
  EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}), 3);
  EXPECT_EQ(text("SELECT reason FROM harvest_engine_dead_letters WHERE execution_id = $1", {id}),
            "crashed_worker");
  auto dead = engine->list_dead_letters();
  ASSERT_TRUE(dead);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ(dead->front().reason, "crashed_worker");
  EXPECT_NE(dead->front().error.find("crashed_worker"), std::string::npos) << dead->front().error;
  auto view = engine->get_execution(id);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->history.back().kind, "WorkflowFailed");
  EXPECT_EQ(view->history.back().payload.value("reason", ""), "crashed_worker");

  // Replayed, it starts counting afresh.
  ASSERT_TRUE(engine->replay_dead_letter(id));
  EXPECT_EQ(scalar("SELECT crash_count FROM harvest_workflow_executions WHERE id = $1", {id}), 0);
}

}  // namespace
}  // namespace harvest::engine
