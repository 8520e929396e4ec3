// Losses on the GPU with the semantics of paddle_like/nn/losses.h (mean over the
// batch, numerically stable forms), computing the loss, the number of correct
// predictions (CountCorrect's rules) and the gradient of the mean loss in one pass.
//   logits: float32 (B, K)   labels: int64 (B) in [0, K)          softmax cross-entropy
//   logits: float32 (B) or (B, 1)   labels: float32 (B) in [0, 1]  sigmoid BCE
//
// These return the loss to the host, so they wait for the stream: call them once
// per step, after the forward pass is queued.
// Thread-safety: stateless; calls on one stream run in order.
#ifndef PADDLE_LIKE_CUDA_LOSS_OPS_H_
#define PADDLE_LIKE_CUDA_LOSS_OPS_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"

namespace pl::cuda {

struct LossResult {
  float loss = 0.0f;    // mean over the batch
  int64_t correct = 0;  // rows predicted right
};

// `grad` (same shape as logits) receives d(mean loss)/d(logits) * grad_scale when
// defined. A label outside [0, K) is INVALID_ARGUMENT naming how many there were.
StatusOr<LossResult> SoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels, const Tensor& grad,
                                         cudaStream_t stream, float grad_scale = 1.0f);
StatusOr<LossResult> SigmoidBinaryCrossEntropy(const Tensor& logits, const Tensor& labels,
                                               const Tensor& grad, cudaStream_t stream,
                                               float grad_scale = 1.0f);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_LOSS_OPS_H_
