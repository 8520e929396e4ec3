#include "paddle_like/client/task_loop.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace pl {

StatusOr<std::optional<proto::Task>> TaskLeaser::Next() {
  if (task_.has_value()) return absl::FailedPreconditionError("the task leased before was not reported");
  return Lease(nullptr, 0);
}

StatusOr<std::optional<proto::Task>> TaskLeaser::ReportAndNext(const StatusOr<TaskOutcome>& outcome) {
  if (!task_.has_value()) return absl::FailedPreconditionError("no leased task to report");
  if (!outcome.ok() || outcome->kind != TaskOutcome::Kind::kTrained) {
    PL_RETURN_IF_ERROR(Report(outcome));
    return Next();
  }
  const proto::Task finished = *std::move(task_);
  task_.reset();
  return Lease(&finished, outcome->samples);
}

void TaskLeaser::CountReport(const proto::Task& task, const std::string& refused) {
  if (refused.empty()) {
    ++result_.tasks_done;
  } else {
    Log(absl::StrCat("task ", task.id(), " no longer ours (", refused, ")"));
  }
}

Status TaskLeaser::ReportTrained(const proto::Task& task, int64_t samples) {
  Status finished = master_.TaskFinished(task, samples);
  heartbeat_.set_task(0);
  if (absl::IsFailedPrecondition(finished) || absl::IsNotFound(finished)) {
    CountReport(task, std::string(finished.message()));
  } else if (!finished.ok()) {
    ended_ = true;
    return Annotate(finished, "reporting a finished task");
  } else {
    CountReport(task, "");
  }
  return absl::OkStatus();
}

StatusOr<std::optional<proto::Task>> TaskLeaser::Lease(const proto::Task* finished, int64_t samples) {
  while (true) {
    const bool leaving = !ended_ && !stop_.load() && leave_ != nullptr && leave_->load();
    if (ended_ || stop_.load() || leaving) {
      // No lease follows: the trained task is reported alone.
      if (finished != nullptr) PL_RETURN_IF_ERROR(ReportTrained(*finished, samples));
      if (leaving) {
        Log(absl::StrCat("leaving as asked, after ", result_.tasks_done, " task(s): no task is held, none given back"));
        ended_ = true;
        result_.left = true;
      }
      break;
    }
    const auto called = std::chrono::steady_clock::now();
    auto got = finished != nullptr ? master_.FinishAndGetTask(*finished, samples) : master_.GetTask();
    result_.leasing_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
    if (finished != nullptr) {
      heartbeat_.set_task(0);
      if (!got.ok()) {
        ended_ = true;
        if (stop_.load()) break;
        return Annotate(got.status(), absl::StrCat("reporting task ", finished->id(), " finished and leasing the next"));
      }
      CountReport(*finished, got->finish_refused());
      finished = nullptr;  // reported: a WAIT's next poll leases only
    }
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
  return ReportTrained(task, outcome->samples);
}

StatusOr<TaskLoopResult> RunTaskLoop(MasterClient& master, HeartbeatThread& heartbeat,
                                     const std::atomic<bool>& stop, const TaskLoopCallbacks& callbacks,
                                     const std::atomic<bool>* leave) {
  TaskLeaser leaser(master, heartbeat, stop, callbacks.log, leave);
  if (callbacks.before_lease) callbacks.before_lease();
  PL_ASSIGN_OR_RETURN(std::optional<proto::Task> task, leaser.Next());
  while (task.has_value()) {
    StatusOr<TaskOutcome> outcome = callbacks.train_task(*task);
    if (callbacks.before_lease) callbacks.before_lease();
    const int64_t id = master.trainer_id();
    PL_ASSIGN_OR_RETURN(task, leaser.ReportAndNext(outcome));
    // Registered again within the call (the master had dropped this trainer): the
    // caller learns the new id before it trains the task leased with it.
    if (task.has_value() && master.trainer_id() != id && callbacks.before_lease) callbacks.before_lease();
  }
  return leaser.result();
}

}  // namespace pl
