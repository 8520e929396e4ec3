#include "paddle_like/client/task_loop.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace pl {

StatusOr<TaskLoopResult> RunTaskLoop(MasterClient& master, HeartbeatThread& heartbeat,
                                     const std::atomic<bool>& stop, const TaskLoopCallbacks& callbacks) {
  auto log = [&callbacks](const std::string& line) {
    if (callbacks.log) callbacks.log(line);
  };
  TaskLoopResult result;
  while (!stop.load()) {
    if (callbacks.before_lease) callbacks.before_lease();
    auto got = master.GetTask();
    if (!got.ok()) {
      if (stop.load()) break;
      return Annotate(got.status(), "getting a task");
    }
    if (got->result() == proto::GetTaskResponse::JOB_DONE) {
      result.job_done = true;
      break;
    }
    if (got->result() == proto::GetTaskResponse::WAIT) {
      const auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      result.waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      continue;
    }
    const proto::Task& task = got->task();
    heartbeat.set_task(task.id());
    StatusOr<TaskOutcome> outcome = callbacks.train_task(task);
    const bool interrupted = outcome.ok() ? outcome->kind == TaskOutcome::Kind::kInterrupted : stop.load();
    if (interrupted) {
      const int64_t pushed = outcome.ok() ? outcome->samples : 0;
      (void)master.TaskFailed(task, "trainer stopping", /*returned=*/true, pushed);
      heartbeat.set_task(0);
      log(absl::StrCat("stop requested: returned task ", task.id(), " to the master",
                       pushed > 0 ? absl::StrCat(" (", pushed, " of its samples were pushed)") : ""));
      break;
    }
    if (!outcome.ok()) {
      (void)master.TaskFailed(task, std::string(outcome.status().message()), /*returned=*/false);
      heartbeat.set_task(0);
      return Annotate(outcome.status(), absl::StrCat("task ", task.id()));
    }
    switch (outcome->kind) {
      case TaskOutcome::Kind::kBadTask:
        log(absl::StrCat("task ", task.id(), " failed: ", outcome->reason));
        (void)master.TaskFailed(task, outcome->reason, /*returned=*/false);
        heartbeat.set_task(0);
        continue;
      case TaskOutcome::Kind::kTrained:
      case TaskOutcome::Kind::kInterrupted:  // handled above
        break;
    }
    Status finished = master.TaskFinished(task, outcome->samples);
    heartbeat.set_task(0);
    if (absl::IsFailedPrecondition(finished) || absl::IsNotFound(finished)) {
      log(absl::StrCat("task ", task.id(), " no longer ours (", finished.message(), ")"));
    } else if (!finished.ok()) {
      return Annotate(finished, "reporting a finished task");
    } else {
      ++result.tasks_done;
    }
  }
  result.stopped = stop.load();
  return result;
}

}  // namespace pl
