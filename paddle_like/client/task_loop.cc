#include "paddle_like/client/task_loop.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace pl {

StatusOr<std::optional<proto::Task>> TaskLeaser::Next() {
  if (task_.has_value()) return absl::FailedPreconditionError("the task leased before was not reported");
  while (!ended_ && !stop_.load()) {
    if (leave_ != nullptr && leave_->load()) {
      Log(absl::StrCat("leaving as asked, after ", result_.tasks_done, " task(s): no task is held, none given back"));
      ended_ = true;
      result_.left = true;
      break;
    }
    auto got = master_.GetTask();
    if (!got.ok()) {
      if (stop_.load()) break;
      return Annotate(got.status(), "getting a task");
    }
    if (got->result() == proto::GetTaskResponse::JOB_DONE) {
      result_.job_done = true;
      ended_ = true;
      break;
    }
    if (got->result() == proto::GetTaskResponse::WAIT) {
      const auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      result_.waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      continue;
    }
    task_ = got->task();
    heartbeat_.set_task(task_->id());
    return task_;
  }
  result_.stopped = stop_.load() || result_.left;
  return std::optional<proto::Task>();
}

Status TaskLeaser::Report(const StatusOr<TaskOutcome>& outcome) {
  if (!task_.has_value()) return absl::FailedPreconditionError("no leased task to report");
  const proto::Task task = *std::move(task_);
  task_.reset();
  const bool interrupted = outcome.ok() ? outcome->kind == TaskOutcome::Kind::kInterrupted : stop_.load();
  if (interrupted) {
    const int64_t pushed = outcome.ok() ? outcome->samples : 0;
    (void)master_.TaskFailed(task, "trainer stopping", /*returned=*/true, pushed);
    heartbeat_.set_task(0);
    Log(absl::StrCat("stop requested: returned task ", task.id(), " to the master",
                     pushed > 0 ? absl::StrCat(" (", pushed, " of its samples were pushed)") : ""));
    ended_ = true;
    result_.stopped = stop_.load();
    return absl::OkStatus();
  }
  if (!outcome.ok()) {
    (void)master_.TaskFailed(task, std::string(outcome.status().message()), /*returned=*/false);
    heartbeat_.set_task(0);
    ended_ = true;
    return Annotate(outcome.status(), absl::StrCat("task ", task.id()));
  }
  if (outcome->kind == TaskOutcome::Kind::kBadTask) {
    Log(absl::StrCat("task ", task.id(), " failed: ", outcome->reason));
    (void)master_.TaskFailed(task, outcome->reason, /*returned=*/false);
    heartbeat_.set_task(0);
    return absl::OkStatus();
  }
  Status finished = master_.TaskFinished(task, outcome->samples);
  heartbeat_.set_task(0);
  if (absl::IsFailedPrecondition(finished) || absl::IsNotFound(finished)) {
    Log(absl::StrCat("task ", task.id(), " no longer ours (", finished.message(), ")"));
  } else if (!finished.ok()) {
    ended_ = true;
    return Annotate(finished, "reporting a finished task");
  } else {
    ++result_.tasks_done;
  }
  return absl::OkStatus();
}

StatusOr<TaskLoopResult> RunTaskLoop(MasterClient& master, HeartbeatThread& heartbeat,
                                     const std::atomic<bool>& stop, const TaskLoopCallbacks& callbacks,
                                     const std::atomic<bool>* leave) {
  TaskLeaser leaser(master, heartbeat, stop, callbacks.log, leave);
  while (true) {
    if (callbacks.before_lease) callbacks.before_lease();
    PL_ASSIGN_OR_RETURN(std::optional<proto::Task> task, leaser.Next());
    if (!task.has_value()) break;
    PL_RETURN_IF_ERROR(leaser.Report(callbacks.train_task(*task)));
  }
  return leaser.result();
}

}  // namespace pl
