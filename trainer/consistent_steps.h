// ConsistentSteps: a trainer's part in a job of virtual trainers (pl-master
// --virtual_trainers V, docs/consistent-training.md). The job's data is V tasks, one per
// virtual trainer, and global step s (the pservers' version) takes micro-batch
// j = s mod K of every task of pass s / K + 1 that has one, K being the most
// micro-batches a task holds. This trainer holds some of the tasks (its lease slots:
// its share of V among the live trainers, HeartbeatResponse.lease_slots) and, for each
// step, pulls the step's parameters exactly, computes the micro-batch of every task it
// holds, and pushes each as that virtual trainer's; the pservers sum them in
// virtual-trainer order. What a micro-batch is, and its gradient, depend only on the
// job, the task and the step, so the parameters are the same bits however many
// trainers run and whoever joins, leaves or dies:
//
//   - a task whose last micro-batch's step is applied is reported finished (its records
//     counted by the master once), and the slot leases the next (pass overlap);
//   - a slot beyond the share (a trainer joined) gives its task back between steps, as
//     a stop does: resumable, so whoever leases it goes on at the job's step and
//     nothing is trained twice;
//   - a task leased mid-step (its holder died or left) is computed for that step at
//     once, from the step's exact values (a pserver that the old holder's push reached
//     may already be a step further: it serves the values it replaced); a micro-batch
//     pushed twice counts once.
//
// Thread-safety: one call at a time, on the training loop's thread; `stop` and `leave`
// may be set from a signal handler.
#ifndef PADDLE_LIKE_TRAINER_CONSISTENT_STEPS_H_
#define PADDLE_LIKE_TRAINER_CONSISTENT_STEPS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "paddle_like/client/master_client.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/core/status.h"
#include "paddle_like/metrics/training_observer.h"
#include "proto/master.pb.h"
#include "trainer/example_data.h"
#include "trainer/models.h"
#include "trainer/step_backend.h"

namespace pl {

// The job's steps as every trainer computes them from its ConsistentSchedule.
//   V = virtual trainers (= tasks), b = micro-batch, K = steps a pass.
class StepSchedule {
 public:
  // INVALID_ARGUMENT for a schedule that is not one (no tasks, b < 1, a task count that
  // is not V, a task with no records).
  static StatusOr<StepSchedule> From(const proto::ConsistentSchedule& schedule);

  int32_t virtual_trainers() const { return static_cast<int32_t>(batches_.size()); }
  int64_t micro_batch() const { return micro_batch_; }
  int64_t steps_per_pass() const { return steps_per_pass_; }
  int64_t total_steps() const { return steps_per_pass_ * num_passes_; }
  // Micro-batches of task `task_id` (1-based) in a pass.
  int64_t batches(int64_t task_id) const { return batches_[task_id - 1]; }
  // The first step of 1-based `pass`.
  int64_t first_step(int32_t pass) const { return (pass - 1) * steps_per_pass_; }
  // The virtual trainers (task id - 1) with a micro-batch in step `step` (StepMask).
  const std::string& expects(int64_t step) const { return masks_[step % steps_per_pass_]; }

 private:
  int64_t micro_batch_ = 0;
  int32_t num_passes_ = 0;
  int64_t steps_per_pass_ = 0;
  std::vector<int64_t> batches_;
  std::vector<std::string> masks_;  // by step of the pass
};

struct ConsistentStepsOptions {
  uint64_t seed = 1;           // the model's: each task's sample order is drawn from it
  double log_every_s = 2.0;
  metrics::TrainingObserver* observer = nullptr;  // may be null
  std::function<void(const std::string&)> log;    // one line each
};

struct ConsistentStepsResult {
  int64_t tasks_done = 0;      // reported finished and counted
  int64_t micro_batches = 0;   // computed and pushed by this trainer
  int64_t samples = 0;         // in those micro-batches
  int64_t steps_seen = 0;      // global steps this trainer saw applied
  bool job_done = false;
  bool stopped = false;        // a stop or a leave gave its tasks back
  bool left = false;           // by `leave`
  double waited_s = 0;         // waiting for steps it had nothing (more) for
  double compute_s = 0, exchange_s = 0;
};

class ConsistentSteps {
 public:
  // Every pointer outlives the object. `params` is connected, with
  // ParameterClientOptions::virtual_trainers set.
  ConsistentSteps(StepSchedule schedule, ConsistentStepsOptions options, MasterClient* master,
                  ParameterClient* params, StepBackend* backend, ExampleModel* model);

  // Trains until the job is done, or `stop` / `leave` is set (its tasks then go back,
  // resumable, between steps). An error gives the held tasks back first.
  StatusOr<ConsistentStepsResult> Run(const std::atomic<bool>& stop, const std::atomic<bool>* leave);

 private:
  struct Slot {
    std::optional<proto::Task> task;
    ExampleSet data;
    std::vector<int64_t> order;  // the pass's sample order of the task
    int64_t first_step = 0;
    int64_t last_step = 0;       // the step of its last micro-batch
  };

  // Between steps (and while a step waits): reports finished tasks, gives back what
  // is over the share, leases into empty slots; false once the master said JOB_DONE.
  StatusOr<bool> KeepLeases(int64_t step, bool poll_empty);
  Status Take(int32_t slot, const proto::Task& task);
  // Computes and pushes the micro-batches of `step` this trainer holds and has not
  // pushed yet.
  Status Contribute(int64_t step);
  // Gives every held task back (resumable).
  void GiveBack(const std::string& why);
  void Log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  const StepSchedule schedule_;
  const ConsistentStepsOptions options_;
  MasterClient* const master_;
  ParameterClient* const params_;
  StepBackend* const backend_;
  ExampleModel* const model_;
  std::vector<Slot> slots_;             // by lease slot
  std::vector<int64_t> pushed_;         // task ids pushed for the open step
  int64_t trainer_id_ = 0;              // the id the slots were leased under
  ConsistentStepsResult result_;
  // For the progress line.
  double window_loss_ = 0;
  int64_t window_batches_ = 0, window_correct_ = 0, window_samples_ = 0;
  double last_log_ = 0;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_CONSISTENT_STEPS_H_
