// Single-process training: the whole loop (shuffle, batch, forward/backward, local
// optimizer step, progress, evaluation) in one process, no master or pservers.
//
// Thread-safety: one call at a time per model.
#ifndef PADDLE_LIKE_TRAINER_LOCAL_TRAINER_H_
#define PADDLE_LIKE_TRAINER_LOCAL_TRAINER_H_

#include <ostream>

#include "paddle_like/metrics/training_observer.h"
#include "paddle_like/optim/update_rules.h"
#include "paddle_like/process/cpu_times.h"
#include "trainer/batching.h"
#include "trainer/step_backend.h"

namespace pl {

struct LocalTrainOptions {
  int epochs = 5;
  int64_t batch_size = 64;
  OptimizerSpec optimizer;
  uint64_t seed = 1;             // shuffling
  double log_every_s = 2.0;      // progress line period
  int64_t eval_batch_size = 500;
  int64_t eval_every_epoch_limit = 0;  // >0: evaluate that many test examples after each epoch
  // Told of every step and of the final evaluation (TensorBoard, /metrics); may be null.
  metrics::TrainingObserver* observer = nullptr;
};

struct TrainReport {
  double final_metric = 0;       // test accuracy or AUC
  double samples_per_s = 0;      // training throughput (excludes evaluation)
  double train_seconds = 0;
  int64_t steps = 0;
  process::CpuTimes cpu;          // this process's, over the training (not evaluation)
};

// `backend` null: the CPU.
StatusOr<TrainReport> TrainLocally(ExampleModel& model, const ExampleSet& train,
                                   const ExampleSet& test, const LocalTrainOptions& options,
                                   std::ostream& log, StepBackend* backend = nullptr);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_LOCAL_TRAINER_H_
