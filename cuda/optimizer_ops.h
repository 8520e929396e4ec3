// The optimizers of the registry (paddle_like/optim/optimizer_registry.h) on the GPU:
// the same formulas, the same slot-major state layout (slot k of an n-element block at
// state + k*n), the same 1-based step for Adam's bias correction (computed in double
// on the host as the CPU update does). A block of parameters, its gradient and its
// state can thus move between the CPU optimizer, a parameter server and the GPU
// unchanged.
//
// An optimizer's GPU update is an optional hook registered here by name, beside the
// kernels (the optimizer's definition lives in paddle_like/optim, which does not link
// CUDA). sgd, momentum, adagrad and adam have one (RegisterBuiltinGpuOptimizers, run on
// first use); an optimizer without one trains on the CPU path only.
//
// Thread-safety: the ops are stateless; calls on one stream run in order.
// RegisterGpuOptimizer must finish before other threads use GPU optimizers.
#ifndef PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_
#define PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_

#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"
#include "paddle_like/optim/update_rules.h"

namespace pl::cuda {

// One update on the device: `block` holds device pointers (state_stride = n), already
// checked against the spec's slot count; queue the work on `stream`.
using GpuOptimizerApply = Status (*)(const OptimizerParams& params, const UpdateBlock& block,
                                     cudaStream_t stream);

// NOT_FOUND when `name` is not a registered optimizer (RegisterOptimizer first);
// ALREADY_EXISTS when it has a GPU update already.
Status RegisterGpuOptimizer(const std::string& name, GpuOptimizerApply apply);
// The optimizers with a GPU update, sorted.
std::vector<std::string> GpuOptimizerNames();
bool HasGpuOptimizer(const std::string& name);
// Registers the built-ins' GPU updates (once; later calls do nothing).
void RegisterBuiltinGpuOptimizers();

// State for n elements on `device`, initialised as InitSlots does: shape
// (NumSlots(kind) * n), undefined-size-0 for SGD.
StatusOr<Tensor> InitSlotsOnDevice(const OptimizerSpec& spec, int64_t n, int device, cudaStream_t stream);

// param (n) and grad (n) any shape with the same element count; state
// (NumSlots * n). Validates the spec (ValidateOptimizerSpec) and step >= 1;
// UNIMPLEMENTED naming the optimizers that have one when the spec's has no GPU update.
Status ApplyUpdateOnDevice(const OptimizerSpec& spec, const Tensor& param, const Tensor& grad,
                           const Tensor& state, int64_t step, cudaStream_t stream);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_
