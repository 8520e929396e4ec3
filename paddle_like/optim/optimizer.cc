#include "paddle_like/optim/optimizer.h"

namespace pl {

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(Module* module, const OptimizerSpec& spec) {
  PL_RETURN_IF_ERROR(ValidateOptimizerSpec(spec));
  if (module == nullptr) return absl::InvalidArgumentError("Optimizer: null module");
  return std::unique_ptr<Optimizer>(new Optimizer(module, spec));
}

Status Optimizer::Step() {
  const int slots = NumSlots(spec_.kind);
  for (auto& np : module_->NamedParameters()) {
    Parameter* p = np.param;
    if (p->kind == ParamKind::kDense) {
      const Tensor& grad = p->var.grad();
      if (!grad.defined()) continue;
      const Tensor& value = p->var.value();
      DenseState& st = dense_[np.name];
      if (!st.slots.defined()) {
        st.slots = Tensor({std::max<int64_t>(slots * value.numel(), 1)}, DType::kFloat32);
        InitSlots(spec_, st.slots.f32(), value.numel());
      }
      ++st.step;
      ApplyUpdate(spec_, value.f32(), grad.f32(), st.slots.f32(), value.numel(), st.step);
      grad.SetZero();
    } else {
      SparseTable& table = *p->table;
      const SparseRows& g = table.grad();
      auto& states = rows_[np.name];
      const int64_t dim = table.dim();
      for (size_t i = 0; i < g.size(); ++i) {
        const int64_t id = g.ids()[i];
        RowState& st = states[id];
        if (st.slots.empty() && slots > 0) {
          st.slots.resize(slots * dim);
          InitSlots(spec_, st.slots.data(), dim);
        }
        ++st.step;
        ApplyUpdate(spec_, table.Row(id), g.values().data() + i * dim, st.slots.data(), dim, st.step);
      }
      table.ZeroGrad();
    }
  }
  ++steps_;
  return absl::OkStatus();
}

}  // namespace pl
