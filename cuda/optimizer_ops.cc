#include "cuda/optimizer_ops.h"

#include <algorithm>
#include <cmath>

#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

StatusOr<Tensor> InitSlotsOnDevice(const OptimizerSpec& spec, int64_t n, int device, cudaStream_t stream) {
  const int64_t total = NumSlots(spec.kind) * n;
  PL_ASSIGN_OR_RETURN(Tensor state, AllocateDeviceTensor({total}, DType::kFloat32, device));
  if (total == 0) return state;
  if (spec.kind == OptimizerKind::kAdagrad && spec.initial_accumulator != 0.0f) {
    Tensor host({total}, DType::kFloat32);
    InitSlots(spec, host.f32(), n);
    PL_RETURN_IF_ERROR(CopyToDevice(host, state, stream));
  } else {
    PL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state.raw_data(), 0, state.bytes(), stream));
  }
  return state;
}

Status ApplyUpdateOnDevice(const OptimizerSpec& s, const Tensor& param, const Tensor& grad,
                           const Tensor& state, int64_t step, cudaStream_t stream) {
  const char* op = "ApplyUpdateOnDevice";
  PL_RETURN_IF_ERROR(ValidateOptimizerSpec(s));
  PL_RETURN_IF_ERROR(CheckGpu(param, DType::kFloat32, op, "param"));
  const int64_t n = param.numel();
  PL_RETURN_IF_ERROR(CheckGpu(grad, DType::kFloat32, op, "grad"));
  if (grad.numel() != n) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": grad ", grad.ShapeString(), " does not match param ",
                                                   param.ShapeString()));
  }
  const int64_t slots = NumSlots(s.kind);
  if (slots > 0) {
    PL_RETURN_IF_ERROR(CheckGpu(state, DType::kFloat32, op, "state"));
    if (state.numel() != slots * n) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", OptimizerName(s.kind), " needs ", slots * n,
                                                     " state values for ", n, " parameters, got ",
                                                     state.numel()));
    }
  }
  if (step < 1) return absl::InvalidArgumentError(absl::StrCat(op, ": step must be >= 1, got ", step));
  float* p = param.f32();
  const float* g = grad.f32();
  switch (s.kind) {
    case OptimizerKind::kSGD:
      return FromCuda(kernels::SgdUpdate(p, g, n, s.learning_rate, s.weight_decay, stream), "SgdUpdate");
    case OptimizerKind::kMomentum:
      return FromCuda(kernels::MomentumUpdate(p, g, state.f32(), n, s.learning_rate, s.momentum,
                                              s.weight_decay, stream),
                      "MomentumUpdate");
    case OptimizerKind::kAdagrad:
      return FromCuda(kernels::AdagradUpdate(p, g, state.f32(), n, s.learning_rate, s.epsilon,
                                             s.weight_decay, stream),
                      "AdagradUpdate");
    case OptimizerKind::kAdam: {
      // Exactly ApplyUpdate's bias corrections (double, then rounded to float).
      const double t = static_cast<double>(std::max<int64_t>(step, 1));
      const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta1, t)));
      const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta2, t)));
      return FromCuda(kernels::AdamUpdate(p, g, state.f32(), state.f32() + n, n, s.learning_rate, s.beta1,
                                          s.beta2, s.epsilon, s.weight_decay, c1, c2, stream),
                      "AdamUpdate");
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": unknown optimizer kind ", static_cast<int>(s.kind)));
}

}  // namespace pl::cuda
