// Element-wise GPU ops: ReLU/Sigmoid/Tanh (forward from x, backward from the saved
// output y, exactly as paddle_like/nn/activations.h), bias add/reduce over a
// channel axis, and in-place scaling. Any shape; float32 CUDA tensors.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef PADDLE_LIKE_CUDA_ACTIVATION_OPS_H_
#define PADDLE_LIKE_CUDA_ACTIVATION_OPS_H_

#include <cuda_runtime.h>

#include "cuda/kernels.h"
#include "paddle_like/core/tensor.h"

namespace pl::cuda {

using kernels::Activation;
const char* ActivationName(Activation act);

// y = f(x); y has x's shape.
Status ActivationForward(Activation act, const Tensor& x, const Tensor& y, cudaStream_t stream);
// gx (+)= f'(y) * gy; all of y's shape.
Status ActivationBackward(Activation act, const Tensor& y, const Tensor& gy, const Tensor& gx,
                          bool accumulate, cudaStream_t stream);

// y (N, C, ...) += b (C), broadcast over dim 1 (a Linear's (B, out) or a conv's NCHW).
Status BiasAdd(const Tensor& y, const Tensor& b, cudaStream_t stream);
// db (C) (+)= sum of gy (N, C, ...) over every dim but 1.
Status BiasGrad(const Tensor& gy, const Tensor& db, bool accumulate, cudaStream_t stream);
// x *= alpha, in place.
Status Scale(const Tensor& x, float alpha, cudaStream_t stream);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_ACTIVATION_OPS_H_
