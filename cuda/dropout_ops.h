// Inverted dropout on the GPU with exactly the masks of paddle_like/nn/dropout.h:
// call k of a layer with seed s uses stream MixSeed(MixSeed(s, "drop"), k), and
// element i is kept (scaled by 1/(1-p)) iff the top 24 bits of MixSeed(stream, i)
// are >= p * 2^24. A GPU run and a CPU run of the same model draw the same masks.
// The mask is never stored: backward recomputes it from the same DropoutMask.
//
// Thread-safety: stateless; calls on one stream run in order.
#ifndef PADDLE_LIKE_CUDA_DROPOUT_OPS_H_
#define PADDLE_LIKE_CUDA_DROPOUT_OPS_H_

#include <cstdint>

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"

namespace pl::cuda {

struct DropoutMask {
  uint64_t stream_seed = 0;
  uint32_t threshold = 0;  // drop when the 24-bit draw is below this
  float scale = 1.0f;      // 1 / (1 - p)
};

// The mask of call `call` (0-based) of a Dropout(p, seed) layer; INVALID_ARGUMENT
// unless 0 <= p < 1.
StatusOr<DropoutMask> MakeDropoutMask(float p, uint64_t seed, uint64_t call);

// y = x * mask (same shape).
Status DropoutForward(const DropoutMask& mask, const Tensor& x, const Tensor& y, cudaStream_t stream);
// gx (+)= gy * mask.
Status DropoutBackward(const DropoutMask& mask, const Tensor& gy, const Tensor& gx, bool accumulate,
                       cudaStream_t stream);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_DROPOUT_OPS_H_
