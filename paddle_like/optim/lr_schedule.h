// LrSchedule: the learning rate of an update as a function of how many updates the
// parameter received before it, so one schedule means the same in one process and on
// every pserver of a job, survives restarts (the step counts are checkpointed with the
// optimizer state) and needs no call from the trainer.
//
//   rate(s) = learning_rate * Factor(s - 1)      for the s-th update (s >= 1)
//
// Factor(k), after k earlier updates (k counts as torch's scheduler.step() calls, one
// per optimizer step):
//   step         gamma ^ floor(k / step_size)                       (StepLR)
//   exponential  gamma ^ k                                          (ExponentialLR)
//   cosine       eta_min_factor + (1 - eta_min_factor) * (1 + cos(pi * min(k, t_max) / t_max)) / 2
//                                                                   (CosineAnnealingLR, no restarts)
//   piecewise    linear between (step, factor) points, flat outside (a LambdaLR tabulated)
// times a linear warm-up over the first warmup_steps updates from warmup_factor to 1.
//
// A dense parameter's count is the updates its shard applied to it, the job's steps;
// an embedding row's is that row's own (lazy, as its Adam bias correction).
//
// The schedule travels and is checkpointed inside OptimizerSpec::hyper under "lr.*"
// keys (EncodeLrSchedule), so the wire format and every checkpoint carry it unchanged.
//
// Thread-safety: a value type.
#ifndef PADDLE_LIKE_OPTIM_LR_SCHEDULE_H_
#define PADDLE_LIKE_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/optim/optimizer_spec.h"

namespace pl {

struct LrSchedule {
  enum class Kind { kConstant = 0, kStep = 1, kExponential = 2, kCosine = 3, kPiecewise = 4 };
  Kind kind = Kind::kConstant;
  int64_t step_size = 1;          // step
  double gamma = 1.0;             // step, exponential
  int64_t t_max = 1;              // cosine
  double eta_min_factor = 0.0;    // cosine: the floor, as a fraction of the base rate
  std::vector<std::pair<int64_t, double>> points;  // piecewise: (k, factor), k ascending
  int64_t warmup_steps = 0;
  double warmup_factor = 0.0;     // the factor of the first update's warm-up

  // The factor after `k` earlier updates (k >= 0).
  double Factor(int64_t k) const;
  bool is_constant() const { return kind == Kind::kConstant && warmup_steps == 0; }
  // "cosine(t_max=1000, eta_min_factor=0) + warmup(100 from 0.1)"; "constant".
  std::string ToString() const;
};

// The keys EncodeLrSchedule writes start with this; optimizers own none of them.
inline constexpr char kLrScheduleKeyPrefix[] = "lr.";
inline bool IsLrScheduleKey(const std::string& hyper_name) { return hyper_name.rfind(kLrScheduleKeyPrefix, 0) == 0; }

// Checks the schedule (INVALID_ARGUMENT naming the field), removes any schedule from
// `spec` and writes this one. Step counts are carried as floats: exact below 2^24.
Status EncodeLrSchedule(const LrSchedule& schedule, OptimizerSpec* spec);
// The schedule in `spec` (constant when it has none); INVALID_ARGUMENT naming the key.
StatusOr<LrSchedule> DecodeLrSchedule(const OptimizerSpec& spec);

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_LR_SCHEDULE_H_
