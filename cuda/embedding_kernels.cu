// Embedding kernels over a compact block of rows: the U distinct rows a batch
// touches sit in rows (U, D); slots (N) say which of them each looked-up id is.
// The gradient stays sparse: one accumulated row per distinct id, summed per
// segment in position order (the host groups positions by slot, a counting sort),
// so it is deterministic and needs no atomics.
//   N: looked-up ids   U: distinct ids   D: embedding dim
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace pl::cuda::kernels {
namespace {

__global__ void GatherKernel(const float* rows, const int64_t* slots, float* out, int64_t N, int64_t D) {
  const int64_t n = N * D;
  PL_GRID_STRIDE_LOOP(i, n) {
    const int64_t r = i / D, d = i % D;
    out[i] = rows[slots[r] * D + d];
  }
}

// Block u sums the gy rows of segment u; threads stride over the D columns.
__global__ void SegmentSumKernel(const float* gy, const int64_t* positions, const int64_t* offsets,
                                 float* grad, int64_t D, bool accumulate) {
  const int64_t u = blockIdx.x;
  const int64_t begin = offsets[u], end = offsets[u + 1];
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t j = begin; j < end; ++j) sum += gy[positions[j] * D + d];
    float* out = grad + u * D + d;
    *out = accumulate ? *out + sum : sum;
  }
}

}  // namespace

cudaError_t EmbeddingGather(const float* rows, const int64_t* slots, float* out, int64_t N,
                            int64_t D, cudaStream_t s) {
  if (N * D == 0) return cudaSuccess;
  GatherKernel<<<GridFor(N * D), kThreads, 0, s>>>(rows, slots, out, N, D);
  return cudaGetLastError();
}

cudaError_t EmbeddingSegmentSum(const float* gy, const int64_t* positions, const int64_t* offsets,
                                float* grad, int64_t U, int64_t D, bool accumulate, cudaStream_t s) {
  if (U == 0 || D == 0) return cudaSuccess;
  if (U > 0x7fffffff) return cudaErrorInvalidValue;
  const int threads = D >= kThreads ? kThreads : static_cast<int>((D + 31) / 32 * 32);
  SegmentSumKernel<<<static_cast<unsigned>(U), threads, 0, s>>>(gy, positions, offsets, grad, D,
                                                                 accumulate);
  return cudaGetLastError();
}

}  // namespace pl::cuda::kernels
