// Launch geometry shared by the .cu files: 256-thread blocks over a grid-stride loop,
// the grid capped so huge tensors reuse threads instead of overflowing gridDim.
#ifndef PADDLE_LIKE_CUDA_LAUNCH_CUH_
#define PADDLE_LIKE_CUDA_LAUNCH_CUH_

#include <cstdint>

namespace pl::cuda::kernels {

constexpr int kThreads = 256;

inline unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

// for (i = global thread; i < n; i += grid size)
#define PL_GRID_STRIDE_LOOP(i, n)                                                    \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Sums `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the total. Fixed order, so the result is deterministic.
__device__ inline float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : 0.0f;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

}  // namespace pl::cuda::kernels

#endif  // PADDLE_LIKE_CUDA_LAUNCH_CUH_
