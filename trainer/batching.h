// In-memory examples and the pieces of a training step shared by the single-process
// and the distributed trainer: gathering a batch, computing gradients, evaluating.
//
// Thread-safety: functions are reentrant; a Batcher and a model belong to one thread.
#ifndef PADDLE_LIKE_TRAINER_BATCHING_H_
#define PADDLE_LIKE_TRAINER_BATCHING_H_

#include <cstdint>
#include <random>
#include <vector>

#include "trainer/models.h"

namespace pl {

// N examples: inputs float (N, ...) or int64 (N, F); labels int64 (N) or float (N).
struct ExampleSet {
  Tensor inputs;
  Tensor labels;
  int64_t size() const { return inputs.defined() ? inputs.dim(0) : 0; }
};

// Gathers examples by index into reusable batch tensors (no per-sample allocation).
class Batcher {
 public:
  explicit Batcher(const ExampleSet* data) : data_(data) {}
  // Fills inputs/labels with the examples `indices[begin, end)`; returns views of
  // the batch buffers, valid until the next call.
  ExampleSet Gather(const std::vector<int64_t>& indices, size_t begin, size_t end);

 private:
  const ExampleSet* data_;
  Tensor inputs_, labels_;
};

struct StepStats {
  double loss = 0;
  int64_t correct = 0;  // classification only
  int64_t samples = 0;
};

// Forward, loss and backward on one batch; gradients accumulate in the model's
// parameters (dense grads and sparse tables' row grads).
StatusOr<StepStats> ComputeGradients(ExampleModel& model, const ExampleSet& batch);

struct EvalResult {
  double metric = 0;  // accuracy (classification) or AUC (click-through)
  double loss = 0;
  int64_t samples = 0;
};

// Evaluation mode (no dropout, no graph kept); `max_examples` 0 means all.
StatusOr<EvalResult> Evaluate(ExampleModel& model, const ExampleSet& data, int64_t batch_size,
                              int64_t max_examples = 0);

}  // namespace pl

#endif  // PADDLE_LIKE_TRAINER_BATCHING_H_
