#include "cuda/optimizer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/base/call_once.h"
#include "absl/strings/str_join.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/status.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/registry.h"

namespace pl::cuda {
namespace {

using internal::CheckGpu;

Registry<GpuOptimizerApply>& GpuTable() {
  static auto* const table = new Registry<GpuOptimizerApply>("GPU optimizer");
  return *table;
}

// The built-ins' launchers; hyper-parameters in their definitions' order
// (paddle_like/optim/{momentum,adagrad,adam}.cc).
Status SgdOnDevice(const OptimizerParams& o, const UpdateBlock& b, cudaStream_t stream) {
  return FromCuda(kernels::SgdUpdate(b.param, b.grad, b.n, o.learning_rate, o.weight_decay, stream), "SgdUpdate");
}

Status MomentumOnDevice(const OptimizerParams& o, const UpdateBlock& b, cudaStream_t stream) {
  const float mu = o.hyper[0];
  return FromCuda(kernels::MomentumUpdate(b.param, b.grad, b.state, b.n, o.learning_rate, mu, o.weight_decay,
                                          stream),
                  "MomentumUpdate");
}

Status AdagradOnDevice(const OptimizerParams& o, const UpdateBlock& b, cudaStream_t stream) {
  const float eps = o.hyper[0];
  return FromCuda(kernels::AdagradUpdate(b.param, b.grad, b.state, b.n, o.learning_rate, eps, o.weight_decay,
                                         stream),
                  "AdagradUpdate");
}

Status AdamOnDevice(const OptimizerParams& o, const UpdateBlock& b, cudaStream_t stream) {
  const float b1 = o.hyper[0], b2 = o.hyper[1], eps = o.hyper[2];
  // Exactly the CPU update's bias corrections (double, then rounded to float).
  const double t = static_cast<double>(std::max<int64_t>(b.step, 1));
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, t)));
  return FromCuda(kernels::AdamUpdate(b.param, b.grad, b.state, b.state + b.state_stride, b.n, o.learning_rate,
                                      b1, b2, eps, o.weight_decay, c1, c2, stream),
                  "AdamUpdate");
}

}  // namespace

void RegisterBuiltinGpuOptimizers() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    const std::pair<const char*, GpuOptimizerApply> builtins[] = {
        {"sgd", SgdOnDevice}, {"momentum", MomentumOnDevice}, {"adagrad", AdagradOnDevice}, {"adam", AdamOnDevice}};
    for (const auto& [name, apply] : builtins) {
      Status s = GpuTable().Register(name, apply);
      if (!s.ok()) {  // a programming error
        log::Error(absl::StrCat("built-in GPU optimizer: ", s.ToString()));
        std::abort();
      }
    }
  });
}

Status RegisterGpuOptimizer(const std::string& name, GpuOptimizerApply apply) {
  RegisterBuiltinGpuOptimizers();
  PL_RETURN_IF_ERROR(FindOptimizer(name).status());
  if (apply == nullptr) return absl::InvalidArgumentError(absl::StrCat("GPU optimizer '", name, "': null update"));
  return GpuTable().Register(name, apply);
}

std::vector<std::string> GpuOptimizerNames() {
  RegisterBuiltinGpuOptimizers();
  return GpuTable().Names();
}

bool HasGpuOptimizer(const std::string& name) {
  RegisterBuiltinGpuOptimizers();
  return GpuTable().Find(name).ok();
}

StatusOr<Tensor> InitSlotsOnDevice(const OptimizerSpec& spec, int64_t n, int device, cudaStream_t stream) {
  PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(spec));
  const int64_t total = rule.num_slots() * n;
  PL_ASSIGN_OR_RETURN(Tensor state, AllocateDeviceTensor({total}, DType::kFloat32, device));
  if (total == 0) return state;
  Tensor host({total}, DType::kFloat32);
  rule.InitSlots(host.f32(), n);
  if (std::all_of(host.f32(), host.f32() + total, [](float v) { return v == 0.0f; })) {
    PL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state.raw_data(), 0, state.bytes(), stream));
  } else {
    PL_RETURN_IF_ERROR(CopyToDevice(host, state, stream));
  }
  return state;
}

Status ApplyUpdateOnDevice(const OptimizerSpec& s, const Tensor& param, const Tensor& grad,
                           const Tensor& state, int64_t step, cudaStream_t stream) {
  const char* op = "ApplyUpdateOnDevice";
  PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(s));
  RegisterBuiltinGpuOptimizers();
  auto apply = GpuTable().Find(rule.def().name);
  if (!apply.ok()) {
    return absl::UnimplementedError(absl::StrCat(op, ": optimizer '", rule.def().name,
                                                 "' has no GPU update (GPU optimizers: ",
                                                 absl::StrJoin(GpuOptimizerNames(), ", "), ")"));
  }
  PL_RETURN_IF_ERROR(CheckGpu(param, DType::kFloat32, op, "param"));
  const int64_t n = param.numel();
  PL_RETURN_IF_ERROR(CheckGpu(grad, DType::kFloat32, op, "grad"));
  if (grad.numel() != n) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": grad ", grad.ShapeString(), " does not match param ",
                                                   param.ShapeString()));
  }
  const int64_t slots = rule.num_slots();
  if (slots > 0) {
    PL_RETURN_IF_ERROR(CheckGpu(state, DType::kFloat32, op, "state"));
    if (state.numel() != slots * n) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", rule.def().name, " needs ", slots * n,
                                                     " state values for ", n, " parameters, got ",
                                                     state.numel()));
    }
  }
  if (step < 1) return absl::InvalidArgumentError(absl::StrCat(op, ": step must be >= 1, got ", step));
  const UpdateBlock block{param.f32(), grad.f32(), slots > 0 ? state.f32() : nullptr, n, step, n};
  OptimizerParams params = rule.params();
  params.learning_rate = rule.RateAt(step);  // the learning-rate schedule's, as on the CPU
  return (**apply)(params, block, stream);
}

}  // namespace pl::cuda
