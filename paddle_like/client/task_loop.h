// RunTaskLoop: the one task-lease loop of a trainer, shared by pl-trainer
// (trainer/dist_trainer.cc) and the Python package (paddle_like.distributed through
// python/src/dist_bindings.cc). It leases tasks from the master until the job is done or
// `stop` is set, hands each to the caller's TrainTask callback, and reports the outcome:
//
//   trained      reported with the next lease in one call (GetTaskRequest.finished;
//                TaskFinished alone when no lease follows) (a task whose lease went to
//                another trainer meanwhile, or
//                reported after the master dropped this trainer, is logged and not
//                counted: "task T no longer ours (...)"; a dropped trainer registers
//                again);
//   interrupted  the trainer is stopping: TaskFailed(returned) gives the task back at
//                once (no lease timeout) and the loop ends (`stopped` when `stop` is set);
//                what it had pushed of the task is trained again with it.
//   bad task     its data cannot be used: TaskFailed (counts as a failure of the task),
//                the loop goes on with the next;
//   an error     TaskFailed, and the loop returns the error naming the task, unless a
//                stop was requested meanwhile: then the task is given back and the loop
//                ends with `stopped` (a stop interrupts calls to dead peers).
//
// `leave`, when given and set (pl-trainer: SIGUSR1, which a launcher that shrinks a job
// sends first), ends the loop before the next lease instead: the task in hand is
// trained to its end and reported, so a shrink trains nothing twice (`left` and
// `stopped`). A stop that follows still gives that task back at once.
//
// The heartbeat renews the lease of the task being trained. WAIT answers are polled
// every 200 ms.
//
// Thread-safety: RunTaskLoop runs its callbacks on the calling thread; `stop` may be set
// from any thread or a signal handler.
#ifndef PADDLE_LIKE_CLIENT_TASK_LOOP_H_
#define PADDLE_LIKE_CLIENT_TASK_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "paddle_like/client/heartbeat.h"
#include "paddle_like/client/master_client.h"
#include "paddle_like/core/status.h"

namespace pl {

struct TaskOutcome {
  enum class Kind { kTrained, kInterrupted, kBadTask };
  Kind kind = Kind::kTrained;
  int64_t samples = 0;  // kTrained: the samples the task held (the master's count);
                        // kInterrupted: those whose gradients were pushed before the stop
  std::string reason;   // kBadTask: why, for the master and the log

  static TaskOutcome Trained(int64_t samples) { return {Kind::kTrained, samples, ""}; }
  static TaskOutcome Interrupted(int64_t samples_pushed = 0) { return {Kind::kInterrupted, samples_pushed, ""}; }
  static TaskOutcome BadTask(std::string why) { return {Kind::kBadTask, 0, std::move(why)}; }
};

struct TaskLoopCallbacks {
  // Trains on one leased task (required).
  std::function<StatusOr<TaskOutcome>(const proto::Task& task)> train_task;
  // Before each lease (optional): e.g. the pserver client learns the trainer id the
  // master gave, which changes when the trainer registers again.
  std::function<void()> before_lease;
  // One line for the trainer's log (optional).
  std::function<void(const std::string& line)> log;
};

struct TaskLoopResult {
  int64_t tasks_done = 0;  // trained and counted by the master
  bool job_done = false;   // the master said JOB_DONE
  bool stopped = false;    // ended by `stop` or `leave`
  bool left = false;       // ended by `leave`, before a lease: nothing given back
  double waited_s = 0;     // told to wait for work (every task of the pass out)
  double leasing_s = 0;    // in the master's calls that report and lease (waits apart)
};

StatusOr<TaskLoopResult> RunTaskLoop(MasterClient& master, HeartbeatThread& heartbeat,
                                     const std::atomic<bool>& stop, const TaskLoopCallbacks& callbacks,
                                     const std::atomic<bool>* leave = nullptr);

// The same loop, one step at a time, for a caller whose loop is its own (a Python
// generator over leased tasks, paddle_like.distributed.tasks()): Next() leases the next
// task (waiting while the master says WAIT), Report() reports what became of it exactly
// as RunTaskLoop does. RunTaskLoop is Next/train/Report until Next returns nothing.
//
// Thread-safety: one thread at a time; `stop` may be set from anywhere.
class TaskLeaser {
 public:
  TaskLeaser(MasterClient& master, HeartbeatThread& heartbeat, const std::atomic<bool>& stop,
             std::function<void(const std::string&)> log = nullptr, const std::atomic<bool>* leave = nullptr)
      : master_(master), heartbeat_(heartbeat), stop_(stop), leave_(leave), log_(std::move(log)) {}

  // The next task, or nullopt once the job is done, a stop or a leave was requested, or
  // a task was given back (result() says which). An error getting a task is returned unless a stop
  // came meanwhile. Report() must follow each task before the next Next().
  StatusOr<std::optional<proto::Task>> Next();
  // What became of the task Next() returned; an error outcome fails the task and is
  // returned naming it (given back instead when a stop came meanwhile).
  Status Report(const StatusOr<TaskOutcome>& outcome);
  // Report() then Next(), a trained task reported in the call that leases the next
  // (one round trip to the master a task instead of two).
  StatusOr<std::optional<proto::Task>> ReportAndNext(const StatusOr<TaskOutcome>& outcome);

  const TaskLoopResult& result() const { return result_; }
  bool holds_task() const { return task_.has_value(); }

 private:
  void Log(const std::string& line) const {
    if (log_) log_(line);
  }
  // Leases (waiting out WAITs), reporting `finished` (may be null) with the first call.
  StatusOr<std::optional<proto::Task>> Lease(const proto::Task* finished, int64_t samples);
  // TaskFinished alone (no lease follows).
  Status ReportTrained(const proto::Task& task, int64_t samples);
  // Counts a reported task, or logs why the master did not (`refused`).
  void CountReport(const proto::Task& task, const std::string& refused);

  MasterClient& master_;
  HeartbeatThread& heartbeat_;
  const std::atomic<bool>& stop_;
  const std::atomic<bool>* leave_;  // may be null
  std::function<void(const std::string&)> log_;
  std::optional<proto::Task> task_;  // leased and not yet reported
  bool ended_ = false;               // a task was given back: no more leases
  TaskLoopResult result_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_TASK_LOOP_H_
