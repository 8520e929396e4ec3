// Inverted dropout with the CPU layer's mask (paddle_like/nn/dropout.cc): element i
// of a call is kept iff the top 24 bits of MixSeed(stream_seed, i) >= threshold,
// where stream_seed and threshold come from the layer exactly as on the CPU, so a
// GPU run draws the same masks as a CPU run of the same model. Backward recomputes
// the mask from (stream_seed, i) instead of storing it.
//   n: elements
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace pl::cuda::kernels {
namespace {

// paddle_like/nn/init.cc MixSeed (splitmix64 finaliser), bit for bit.
__device__ inline uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL + (b * 0xbf58476d1ce4e5b9ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__device__ inline float Mask(uint64_t stream_seed, int64_t i, uint32_t threshold, float scale) {
  const uint32_t u = static_cast<uint32_t>(MixSeed(stream_seed, static_cast<uint64_t>(i)) >> 40);
  return u >= threshold ? scale : 0.0f;
}

__global__ void DropoutForwardKernel(const float* x, float* y, int64_t n, uint64_t seed,
                                     uint32_t threshold, float scale) {
  PL_GRID_STRIDE_LOOP(i, n) y[i] = x[i] * Mask(seed, i, threshold, scale);
}

__global__ void DropoutBackwardKernel(const float* gy, float* gx, int64_t n, uint64_t seed,
                                      uint32_t threshold, float scale, bool accumulate) {
  PL_GRID_STRIDE_LOOP(i, n) {
    const float d = gy[i] * Mask(seed, i, threshold, scale);
    gx[i] = accumulate ? gx[i] + d : d;
  }
}

}  // namespace

cudaError_t DropoutForward(const float* x, float* y, int64_t n, uint64_t stream_seed,
                           uint32_t threshold, float scale, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  DropoutForwardKernel<<<GridFor(n), kThreads, 0, s>>>(x, y, n, stream_seed, threshold, scale);
  return cudaGetLastError();
}

cudaError_t DropoutBackward(const float* gy, float* gx, int64_t n, uint64_t stream_seed,
                            uint32_t threshold, float scale, bool accumulate, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  DropoutBackwardKernel<<<GridFor(n), kThreads, 0, s>>>(gy, gx, n, stream_seed, threshold, scale,
                                                        accumulate);
  return cudaGetLastError();
}

}  // namespace pl::cuda::kernels
