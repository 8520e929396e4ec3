// The optimizer registry: every optimizer is one OptimizerDef — its name, its
// hyper-parameters with defaults and ranges, its state slots and its CPU update —
// defined in its own file (sgd.cc, momentum.cc, adagrad.cc, adam.cc) and added by
// RegisterOptimizer. The single-process Optimizer, the parameter server, the wire
// format, the trainer's --optimizer flag and the Python bindings all find optimizers
// here by name, so a new optimizer is its own file plus one RegisterOptimizer call
// (tests/optim/toy_optimizer_test.cc shows one). Its GPU update, when it has one, is
// registered beside the kernels (cuda/optimizer_ops.h, RegisterGpuOptimizer), since
// this library does not link CUDA.
//
// State is NumSlots float slots per element, slot-major: slot k of an n-element block
// starts at state + k * state_stride. Sparse rows use the same update row by row with
// a per-row step count (lazy updates: a row a batch does not touch keeps its value
// and its state).
//
// Thread-safety: the built-ins are registered on first use (thread-safe). Further
// RegisterOptimizer calls must finish before other threads use optimizers (at the
// start of main or of a test); lookups are then safe from any thread.
#ifndef PADDLE_LIKE_OPTIM_OPTIMIZER_REGISTRY_H_
#define PADDLE_LIKE_OPTIM_OPTIMIZER_REGISTRY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "paddle_like/core/flush_denormals.h"
#include "paddle_like/core/status.h"
#include "paddle_like/optim/lr_schedule.h"
#include "paddle_like/optim/optimizer_spec.h"

namespace pl {

inline constexpr int kMaxHyperParams = 8;

// A spec resolved against its definition: what an update function reads.
struct OptimizerParams {
  float learning_rate = 0;
  float weight_decay = 0;
  std::array<float, kMaxHyperParams> hyper{};  // in OptimizerDef::hyper_params order
};

// One update of n elements (a dense block, part of one, or a sparse row).
struct UpdateBlock {
  float* param;        // (n)
  const float* grad;   // (n)
  float* state;        // slot k of element i at state[k * state_stride + i]; null without slots
  int64_t n;
  int64_t step;        // 1-based count of updates these elements received, this one included
                       // (since their state was restarted, if it was: UpdateRule::Apply)
  int64_t state_stride;
  // How many pushes `grad` is the mean of (a sync step's contributors; 1 otherwise).
  // Rules that track the gradient's noise (adam's v) keep it per push, so a step that
  // averages fewer trainers than the last is not taken as less noisy (adam.cc).
  float averaged = 1.0f;
};

struct HyperParam {
  enum class Range { kPositive, kNonNegative, kUnitInterval /* [0, 1) */ };
  std::string name;
  float default_value = 0;
  Range range = Range::kNonNegative;
};

struct OptimizerDef {
  std::string name;                     // lower case: "adam"
  std::string help;                     // the rule, one line, for --help texts
  std::vector<HyperParam> hyper_params; // besides learning_rate and weight_decay
  // State slots, by name ("m", "v"); each starts at 0, or at the value of hyper-parameter
  // slot_init_param[k] when that is >= 0 (Adagrad's accumulator).
  std::vector<std::string> slots;
  std::vector<int> slot_init_param;     // empty: every slot starts at 0
  // Elementwise, so a block updated in parts equals the block updated whole.
  void (*apply)(const OptimizerParams& params, const UpdateBlock& block) = nullptr;
  // Optional: the state of n elements whose values were restored without their state
  // (a pserver shard given a trainer's copy), slot k at state + k * state_stride. Null:
  // the initial state. Adam marks its moments so that its first steps after the restore
  // ramp up instead of stepping lr * sign(g) in every element (adam.cc).
  void (*restart)(float* state, int64_t n, int64_t state_stride) = nullptr;

  // Index of hyper-parameter `name` in hyper_params, -1 when it has none such.
  int HyperIndex(const std::string& name) const {
    for (size_t i = 0; i < hyper_params.size(); ++i) {
      if (hyper_params[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }
};

// INVALID_ARGUMENT for a definition without a name or update, with more than
// kMaxHyperParams hyper-parameters or a bad slot_init_param; ALREADY_EXISTS for a
// name registered before.
Status RegisterOptimizer(OptimizerDef def);
// NOT_FOUND naming the registered optimizers when `name` is not one of them.
StatusOr<const OptimizerDef*> FindOptimizer(const std::string& name);
// Sorted.
std::vector<std::string> OptimizerNames();
// "adagrad (a += g^2; ...), adam (...), ..." for --help texts.
std::string OptimizerHelp();

// A validated spec bound to its definition; cheap to copy. Optimizer resolves once
// and applies many times. A spec with a learning-rate schedule (lr_schedule.h) applies
// learning_rate * Factor(step - 1) to an update with 1-based `step`. Thread-safety: const methods may run concurrently (Apply on
// disjoint data).
class UpdateRule {
 public:
  // Validates the spec (ValidateOptimizerSpec).
  static StatusOr<UpdateRule> Create(const OptimizerSpec& spec);

  const OptimizerDef& def() const { return *def_; }
  const OptimizerParams& params() const { return params_; }
  void set_learning_rate(float lr) { params_.learning_rate = lr; }
  int num_slots() const { return static_cast<int>(def_->slots.size()); }
  // Initial state for n elements: NumSlots * n floats, slot-major.
  void InitSlots(float* state, int64_t n) const;
  // The state for n elements whose values were restored without theirs, slot-major
  // (OptimizerDef::restart; InitSlots when the rule has none). Their updates then pass
  // the step they were restored at as Apply's `restarted_at`.
  void RestartSlots(float* state, int64_t n) const;
  // Runs with denormals flushed to zero (core/flush_denormals.h), so the single process,
  // every replica of a pserver and the Python bindings compute the same bits. A caller
  // applying many small blocks (sparse rows) keeps its own ScopedFlushDenormals around
  // the loop, which makes this one free.
  // `averaged`: UpdateBlock::averaged. `restarted_at`: for elements whose state was
  // restarted (RestartSlots) at step r, r: the schedule goes on counting `step`, the
  // rule counts its own updates from r (UpdateBlock::step is step - r).
  void Apply(float* param, const float* grad, float* state, int64_t n, int64_t step, int64_t state_stride,
             float averaged = 1.0f, int64_t restarted_at = 0) const {
    ScopedFlushDenormals flush;
    const UpdateBlock block{param, grad, state, n, step - restarted_at, state_stride, averaged};
    if (schedule_ == nullptr) {
      def_->apply(params_, block);
      return;
    }
    OptimizerParams scheduled = params_;
    scheduled.learning_rate = RateAt(step);
    def_->apply(scheduled, block);
  }
  // The rate of an update with 1-based `step` (the base rate without a schedule).
  float RateAt(int64_t step) const {
    if (schedule_ == nullptr) return params_.learning_rate;
    return static_cast<float>(static_cast<double>(params_.learning_rate) * schedule_->Factor(step - 1));
  }
  const LrSchedule* schedule() const { return schedule_.get(); }

 private:
  UpdateRule(const OptimizerDef* def, const OptimizerParams& params) : def_(def), params_(params) {}
  friend StatusOr<UpdateRule> ResolveOptimizer(const OptimizerSpec& spec, bool check_ranges);
  const OptimizerDef* def_;
  OptimizerParams params_;
  std::shared_ptr<const LrSchedule> schedule_;  // null: the base rate throughout
};

// UpdateRule::Create, with the range checks optional (names are always checked).
StatusOr<UpdateRule> ResolveOptimizer(const OptimizerSpec& spec, bool check_ranges);

// Registers sgd, momentum, adagrad and adam (once; later calls do nothing). Every
// function above calls it first, so callers need not.
void RegisterBuiltinOptimizers();

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_OPTIMIZER_REGISTRY_H_
