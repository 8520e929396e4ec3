// The update rules of paddle_like/optim/update_rules.cc as element-wise kernels, the
// same float formulas in the same order (g' = g + wd p), state slot-major as there.
//   n: elements of the parameter block
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace pl::cuda::kernels {
namespace {

__global__ void SgdKernel(float* p, const float* g, int64_t n, float lr, float wd) {
  PL_GRID_STRIDE_LOOP(i, n) p[i] -= lr * (g[i] + wd * p[i]);
}

__global__ void MomentumKernel(float* p, const float* g, float* v, int64_t n, float lr, float mu,
                               float wd) {
  PL_GRID_STRIDE_LOOP(i, n) {
    v[i] = mu * v[i] + (g[i] + wd * p[i]);
    p[i] -= lr * v[i];
  }
}

__global__ void AdagradKernel(float* p, const float* g, float* a, int64_t n, float lr, float eps,
                              float wd) {
  PL_GRID_STRIDE_LOOP(i, n) {
    const float gi = g[i] + wd * p[i];
    a[i] += gi * gi;
    p[i] -= lr * gi / (sqrtf(a[i]) + eps);
  }
}

__global__ void AdamKernel(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                           float b1, float b2, float eps, float wd, float c1, float c2) {
  PL_GRID_STRIDE_LOOP(i, n) {
    const float gi = g[i] + wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] -= lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
  }
}

}  // namespace

cudaError_t SgdUpdate(float* p, const float* g, int64_t n, float lr, float wd, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<GridFor(n), kThreads, 0, s>>>(p, g, n, lr, wd);
  return cudaGetLastError();
}

cudaError_t MomentumUpdate(float* p, const float* g, float* v, int64_t n, float lr, float mu,
                           float wd, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  MomentumKernel<<<GridFor(n), kThreads, 0, s>>>(p, g, v, n, lr, mu, wd);
  return cudaGetLastError();
}

cudaError_t AdagradUpdate(float* p, const float* g, float* a, int64_t n, float lr, float eps,
                          float wd, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  AdagradKernel<<<GridFor(n), kThreads, 0, s>>>(p, g, a, n, lr, eps, wd);
  return cudaGetLastError();
}

cudaError_t AdamUpdate(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                       float b1, float b2, float eps, float wd, float c1, float c2, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  AdamKernel<<<GridFor(n), kThreads, 0, s>>>(p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
  return cudaGetLastError();
}

}  // namespace pl::cuda::kernels
