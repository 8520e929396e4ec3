// Optimizer: applies an update rule (update_rules.h) to a module's parameters in one
// process, keeping the state beside each parameter: a state block per dense
// parameter, and per sparse row a state row plus its own step count (lazy updates:
// rows not in the batch's sparse gradient are not touched).
//
// Thread-safety: not thread-safe; call Step() from the thread that runs the model.
#ifndef PADDLE_LIKE_OPTIM_OPTIMIZER_H_
#define PADDLE_LIKE_OPTIM_OPTIMIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/optim/update_rules.h"

namespace pl {

class Optimizer {
 public:
  // Validates `spec`; the module must outlive the optimizer.
  static StatusOr<std::unique_ptr<Optimizer>> Create(Module* module, const OptimizerSpec& spec);

  // Applies the accumulated gradients, then clears them (dense grads zeroed,
  // sparse grads emptied). Parameters without a gradient are left alone.
  Status Step();
  void ZeroGrad() { module_->ZeroGrad(); }

  const OptimizerSpec& spec() const { return spec_; }
  void set_learning_rate(float lr) { spec_.learning_rate = lr; }
  int64_t steps() const { return steps_; }

 private:
  struct DenseState {
    Tensor slots;  // NumSlots * numel
    int64_t step = 0;
  };
  struct RowState {
    std::vector<float> slots;  // NumSlots * dim, slot-major
    int64_t step = 0;
  };
  Optimizer(Module* module, const OptimizerSpec& spec) : module_(module), spec_(spec) {}

  Module* module_;
  OptimizerSpec spec_;
  int64_t steps_ = 0;
  absl::flat_hash_map<std::string, DenseState> dense_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, RowState>> rows_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_OPTIMIZER_H_
