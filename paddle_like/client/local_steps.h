// LocalSteps: the GEO mode of a parameter-server job (pl-trainer --local_steps K). A
// trainer takes K optimizer steps on its own copy of the dense parameters, then pushes
// the change those K steps made (PushRequest.delta) and pulls the merged parameters,
// which start its next round. The exchange then costs a K-th of what it costs a step.
//
//   async  each trainer's change is added as it arrives, scaled by the inverse of the
//          job's live trainers N (set_merge_scale; Paddle's GEO does the same):
//          theta += delta_i / N. Unscaled, N trainers that start a round from the same
//          theta move it N times as far as one would, and a job of 4 cnn trainers with
//          K = 4 lost 0.25-0.33 of test accuracy (benchmarks/README.md). With
//          `overlap` (the trainer's default in async mode) a round's push and pull run
//          in the background while the next round computes; at the next round's end the
//          pulled values take the place of the ones that round started from, and the
//          round's own progress is kept on top (the rebase: theta_local =
//          pulled + (theta_local - round start)). A round's pull then lacks the round
//          before it at most, the staleness async training accepts. Without `overlap`
//          each round ends by waiting for its push and pull.
//   sync   round r: every trainer starts from the same theta_r, takes K local steps,
//          and theta_{r+1} = theta_r + mean_i delta_i (the pservers' sync step over
//          changes instead of gradients). With SGD and K = 1 that is exactly a sync
//          step with averaged gradients.
//
// The optimizer runs on the trainer (its state, e.g. Adam's moments, stays with the
// trainer across rounds); the pservers only add. Dense parameters only: a sparse
// table's rows differ from batch to batch, so there is no local copy to step.
//
// Thread-safety: one training loop drives it, as it drives its client.
#ifndef PADDLE_LIKE_CLIENT_LOCAL_STEPS_H_
#define PADDLE_LIKE_CLIENT_LOCAL_STEPS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "paddle_like/client/param_client.h"
#include "paddle_like/core/status.h"
#include "paddle_like/core/tensor.h"

namespace pl {

// INVALID_ARGUMENT naming --local_steps when `k` cannot be honoured: below 1, or above
// 1 with a sparse table among `keys` or with the pipelined exchange.
Status ValidateLocalSteps(int k, const KeyStore& keys, bool pipelined);

class LocalSteps {
 public:
  // `client` (not owned) must hold dense keys only (ValidateLocalSteps); k >= 1.
  // `overlap`: async only, and the client must not bind parameters to shared memory
  // (the next round computes while the pull arrives).
  LocalSteps(ParameterClient* client, int k, bool overlap = false);

  int k() const { return k_; }
  // What a round's pushed change is multiplied by (1 by default; async trainers set
  // 1 / live trainers before each round, sync ones keep 1: the pservers average).
  void set_merge_scale(float scale) { merge_scale_ = scale; }
  float merge_scale() const { return merge_scale_; }
  // Steps taken in the current round.
  int taken() const { return taken_; }
  // Whether the next EndStep ends a round: a trainer whose parameters live elsewhere
  // (a GPU) brings them back to the module's tensors before that call.
  bool round_ends_next() const { return taken_ + 1 >= k_; }
  int64_t rounds() const { return rounds_; }
  // Whether Start pulled a base (once; each round's pull then makes the next base).
  bool started() const { return !base_.empty(); }

  // Pulls the parameters and keeps them as the round's base (first step of a task, or
  // to start again after an error).
  Status Start();
  // After a step's local optimizer update of the module's parameters: counts it; the
  // K-th pushes (parameters - base) and pulls the merged values into the module, the
  // next round's base. Returns whether the parameters were replaced.
  StatusOr<bool> EndStep(int64_t num_samples);
  // Pushes an unfinished round's change and pulls (the end of a task: nothing trained
  // is lost, and the master hears of the task only after). Returns whether the
  // parameters were replaced.
  StatusOr<bool> Finish();

 private:
  // The round's change into the gradient tensors, pushed; the pulled values become the base.
  Status EndRound();
  // overlap: the round's change into the gradient tensors; the previous round's pull,
  // if in flight, rebased onto; then this round's push and pull started.
  Status EndOverlappedRound();
  // Gradient tensors = parameters - base (the round's change).
  void ChangeIntoGradients();
  void KeepBase();
  float* BaseOf(Parameter* param);

  ParameterClient* client_;
  const int k_;
  const bool overlap_;
  float merge_scale_ = 1.0f;
  int taken_ = 0;
  int64_t samples_ = 0;
  int64_t rounds_ = 0;
  std::vector<Tensor> base_;  // one per dense key, in keys() order
  absl::flat_hash_map<const Parameter*, size_t> base_index_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_LOCAL_STEPS_H_
