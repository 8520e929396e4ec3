// Element-wise kernels: activations (forward from x, backward from the saved y, as the
// CPU layers in paddle_like/nn/activations.cc), bias add/reduce and scaling.
//   n: elements   outer x C x inner: a tensor seen as (outer, C, inner), bias over C
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace pl::cuda::kernels {
namespace {

__device__ inline float Apply(Activation act, float x) {
  switch (act) {
    case Activation::kRelu: return x > 0.0f ? x : 0.0f;
    // 0.5 * (1 + tanh(x / 2)): the CPU formula, no overflow for large |x|.
    case Activation::kSigmoid: return 0.5f * (tanhf(0.5f * x) + 1.0f);
    case Activation::kTanh: return tanhf(x);
  }
  return x;
}

__device__ inline float Derivative(Activation act, float y) {
  switch (act) {
    case Activation::kRelu: return y > 0.0f ? 1.0f : 0.0f;
    case Activation::kSigmoid: return y * (1.0f - y);
    case Activation::kTanh: return 1.0f - y * y;
  }
  return 1.0f;
}

__global__ void ActivationForwardKernel(Activation act, const float* x, float* y, int64_t n) {
  PL_GRID_STRIDE_LOOP(i, n) y[i] = Apply(act, x[i]);
}

__global__ void ActivationBackwardKernel(Activation act, const float* y, const float* gy, float* gx,
                                         int64_t n, bool accumulate) {
  PL_GRID_STRIDE_LOOP(i, n) {
    // ReLU selects rather than multiplies so an infinite gy at a dead unit stays 0.
    const float d = act == Activation::kRelu ? (y[i] > 0.0f ? gy[i] : 0.0f)
                                             : gy[i] * Derivative(act, y[i]);
    gx[i] = accumulate ? gx[i] + d : d;
  }
}

__global__ void BiasAddKernel(float* y, const float* b, int64_t outer, int64_t C, int64_t inner) {
  const int64_t n = outer * C * inner;
  PL_GRID_STRIDE_LOOP(i, n) y[i] += b[(i / inner) % C];
}

// One block per channel c: sums gy[o, c, k] over o and k.
__global__ void BiasGradKernel(const float* gy, float* db, int64_t outer, int64_t C, int64_t inner,
                               bool accumulate) {
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, k = j % inner;
    sum += gy[(o * C + c) * inner + k];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) db[c] = accumulate ? db[c] + sum : sum;
}

__global__ void ScaleKernel(float* x, int64_t n, float alpha) {
  PL_GRID_STRIDE_LOOP(i, n) x[i] *= alpha;
}

}  // namespace

cudaError_t ActivationForward(Activation act, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  ActivationForwardKernel<<<GridFor(n), kThreads, 0, s>>>(act, x, y, n);
  return cudaGetLastError();
}

cudaError_t ActivationBackward(Activation act, const float* y, const float* gy, float* gx, int64_t n,
                               bool accumulate, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  ActivationBackwardKernel<<<GridFor(n), kThreads, 0, s>>>(act, y, gy, gx, n, accumulate);
  return cudaGetLastError();
}

cudaError_t BiasAdd(float* y, const float* b, int64_t outer, int64_t C, int64_t inner, cudaStream_t s) {
  const int64_t n = outer * C * inner;
  if (n == 0) return cudaSuccess;
  BiasAddKernel<<<GridFor(n), kThreads, 0, s>>>(y, b, outer, C, inner);
  return cudaGetLastError();
}

cudaError_t BiasGrad(const float* gy, float* db, int64_t outer, int64_t C, int64_t inner,
                     bool accumulate, cudaStream_t s) {
  if (C == 0) return cudaSuccess;
  if (C > 0x7fffffff) return cudaErrorInvalidValue;
  BiasGradKernel<<<static_cast<unsigned>(C), kThreads, 0, s>>>(gy, db, outer, C, inner, accumulate);
  return cudaGetLastError();
}

cudaError_t Scale(float* x, int64_t n, float alpha, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<GridFor(n), kThreads, 0, s>>>(x, n, alpha);
  return cudaGetLastError();
}

}  // namespace pl::cuda::kernels
