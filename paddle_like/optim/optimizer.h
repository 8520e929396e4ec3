// Optimizer: applies an update rule (update_rules.h) to a module's parameters in one
// process, keeping the state beside each parameter: a state block per dense
// parameter, and per sparse row a state row plus its own step count (lazy updates:
// rows not in the batch's sparse gradient are not touched). A table with its own
// optimizer (TablePolicy::optimizer) is updated by that rule, with that rule's slots.
//
// Thread-safety: not thread-safe; call Step() from the thread that runs the model.
#ifndef PADDLE_LIKE_OPTIM_OPTIMIZER_H_
#define PADDLE_LIKE_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/optim/update_rules.h"

namespace pl {

// An optimizer's whole state, for checkpoints and resumed runs: Optimizer::ExportState
// copies it out, Optimizer::ImportState checks it against the module and installs it.
// Slots follow the optimizer's definition (optimizer_registry.h), NumSlots(spec.kind)
// of them: Momentum v; Adagrad a; Adam m, v (SGD has none, only step counts).
struct OptimizerState {
  OptimizerSpec spec;
  int64_t steps = 0;  // Step() calls so far
  struct Dense {
    std::string name;            // the parameter's NamedParameters() name
    int64_t step = 0;            // updates applied to it (Adam's bias correction)
    std::vector<Tensor> slots;   // float32, each of the parameter's shape
  };
  struct Rows {
    std::string name;            // the embedding table's NamedParameters() name
    Tensor ids;                  // int64 (R): rows with state, distinct, ascending on export
    Tensor steps;                // int64 (R): updates applied to each row
    std::vector<Tensor> slots;   // float32 (R, dim) each
  };
  std::vector<Dense> dense;      // parameters that were updated at least once
  std::vector<Rows> rows;        // tables with at least one updated row
};

class Optimizer {
 public:
  // Validates `spec`; the module must outlive the optimizer.
  static StatusOr<std::unique_ptr<Optimizer>> Create(Module* module, const OptimizerSpec& spec);

  // Applies the accumulated gradients, then clears them (dense grads zeroed,
  // sparse grads emptied). Parameters without a gradient are left alone.
  Status Step();
  void ZeroGrad() { module_->ZeroGrad(); }

  const OptimizerSpec& spec() const { return spec_; }
  void set_learning_rate(float lr) {
    spec_.learning_rate = lr;
    rule_.set_learning_rate(lr);
  }
  int64_t steps() const { return steps_; }

  // A copy of the spec, the step counts and every slot.
  OptimizerState ExportState() const;
  // Replaces this optimizer's spec and state with `state` (a parameter absent from it
  // starts fresh). Checks everything first and changes nothing on error:
  // INVALID_ARGUMENT for another optimizer kind, an invalid spec, a wrong slot count,
  // shape or dtype, a negative step count or a bad or repeated row id; NOT_FOUND for a
  // name that is not a parameter of the module (or not of that kind). The message
  // names the parameter and the expected and found shapes.
  Status ImportState(const OptimizerState& state);

 private:
  struct DenseState {
    Tensor slots;  // NumSlots * numel
    int64_t step = 0;
  };
  struct RowState {
    std::vector<float> slots;  // NumSlots * dim, slot-major
    int64_t step = 0;
  };
  Optimizer(Module* module, const OptimizerSpec& spec, const UpdateRule& rule)
      : module_(module), spec_(spec), rule_(rule) {}

  // The rule a table's rows follow: its own optimizer (TablePolicy::optimizer), else
  // this one's. Resolved once per table (again if the table's spec changes).
  StatusOr<const UpdateRule*> RuleFor(const std::string& name, const SparseTable& table) const;

  Module* module_;
  OptimizerSpec spec_;
  UpdateRule rule_;  // spec_ resolved
  // name -> (the table's optimizer as ToString, its rule)
  mutable absl::flat_hash_map<std::string, std::pair<std::string, UpdateRule>> table_rules_;
  int64_t steps_ = 0;
  absl::flat_hash_map<std::string, DenseState> dense_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, RowState>> rows_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_OPTIMIZER_H_
