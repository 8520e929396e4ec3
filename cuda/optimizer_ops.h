// The optimizers of paddle_like/optim/update_rules.h on the GPU: the same formulas,
// the same slot-major state layout (slot k of an n-element block at state + k*n),
// the same 1-based step for Adam's bias correction (computed in double on the host
// as ApplyUpdate does). A block of parameters, its gradient and its state can thus
// move between the CPU optimizer, a parameter server and the GPU unchanged.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_
#define PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"
#include "paddle_like/optim/update_rules.h"

namespace pl::cuda {

// State for n elements on `device`, initialised as InitSlots does: shape
// (NumSlots(kind) * n), undefined-size-0 for SGD.
StatusOr<Tensor> InitSlotsOnDevice(const OptimizerSpec& spec, int64_t n, int device, cudaStream_t stream);

// param (n) and grad (n) any shape with the same element count; state
// (NumSlots * n). Validates the spec (ValidateOptimizerSpec) and step >= 1.
Status ApplyUpdateOnDevice(const OptimizerSpec& spec, const Tensor& param, const Tensor& grad,
                           const Tensor& state, int64_t step, cudaStream_t stream);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_OPTIMIZER_OPS_H_
