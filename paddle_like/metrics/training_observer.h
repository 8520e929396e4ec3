// TrainingObserver: what a training loop tells whoever watches it, once per step and
// once per evaluation. The loops (trainer/dist_trainer.h) know only this interface, so
// they need neither TensorBoard nor Prometheus; trainer_telemetry.h implements it.
//
// Thread-safety: an implementation is called by the training loop's thread only.
#ifndef PADDLE_LIKE_METRICS_TRAINING_OBSERVER_H_
#define PADDLE_LIKE_METRICS_TRAINING_OBSERVER_H_

#include <cstdint>
#include <string>

namespace pl::metrics {

struct StepRecord {
  int64_t step = 0;          // this trainer's steps so far, this one included
  double loss = 0;           // the batch's mean loss
  int64_t correct = -1;      // correct predictions in the batch; -1: not a classifier
  int64_t samples = 0;       // the batch size
  double compute_s = 0;      // forward + backward
  double exchange_s = 0;     // push + pull (or handing them to the pipeline)
  double step_s = 0;         // the whole step, wall clock
  // Async: updates other trainers applied between the pull this step's gradients were
  // computed from and the push's application (mean over the pservers); 0 in sync mode
  // and in one process.
  double staleness = 0;
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void OnStep(const StepRecord& record) = 0;
  // `metric`: "accuracy" or "auc", on the test set, after `step` steps.
  virtual void OnEvaluation(int64_t step, const std::string& metric, double value) = 0;
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TRAINING_OBSERVER_H_
