// Loss kernels: softmax cross-entropy over rows of logits and sigmoid binary
// cross-entropy over elements, each writing per-row losses, a correctness flag and
// (optionally) the gradient in one pass; ReduceLossStats then sums them in a fixed
// order, so the reported loss is deterministic.
//   B: rows (batch)   C: classes   n: elements
#include <cfloat>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace pl::cuda::kernels {
namespace {

constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row

__device__ inline float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ inline float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int64_t* labels, int64_t B,
                                          int64_t C, float grad_scale, float* grad,
                                          float* row_loss, float* row_correct) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= B) return;  // whole warps leave together
  const float* x = logits + row * C;
  const int64_t label = labels[row];
  const bool valid = label >= 0 && label < C;

  // Maximum and its first index (ties go to the lower index, as on the CPU).
  float best = -FLT_MAX;
  int64_t best_index = C;
  for (int64_t c = lane; c < C; c += 32) {
    if (x[c] > best) {
      best = x[c];
      best_index = c;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, best_index, o);
    if (ob > best || (ob == best && oi < best_index)) {
      best = ob;
      best_index = oi;
    }
  }
  const float mx = WarpMax(best);
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += 32) sum += expf(x[c] - mx);
  sum = WarpSum(sum);
  const float log_sum = logf(sum);

  if (grad != nullptr) {
    float* g = grad + row * C;
    for (int64_t c = lane; c < C; c += 32) {
      const float p = expf(x[c] - mx) / sum;
      g[c] = valid ? (p - (c == label ? 1.0f : 0.0f)) * grad_scale : 0.0f;
    }
  }
  if (lane == 0) {
    row_loss[row] = valid ? log_sum + mx - x[label] : 0.0f;
    row_correct[row] = valid ? (best_index == label ? 1.0f : 0.0f) : -1.0f;
  }
}

__global__ void SigmoidBceKernel(const float* logits, const float* targets, int64_t n,
                                 float grad_scale, float* grad, float* loss, float* correct) {
  PL_GRID_STRIDE_LOOP(i, n) {
    const float x = logits[i], t = targets[i];
    loss[i] = fmaxf(x, 0.0f) - x * t + log1pf(expf(-fabsf(x)));
    correct[i] = ((x > 0.0f) == (t > 0.5f)) ? 1.0f : 0.0f;
    if (grad != nullptr) grad[i] = (0.5f * (tanhf(0.5f * x) + 1.0f) - t) * grad_scale;
  }
}

__global__ void ReduceLossStatsKernel(const float* loss, const float* correct, int64_t n,
                                      float loss_scale, float* out) {
  float l = 0.0f, ok = 0.0f, bad = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    l += loss[i];
    ok += correct[i] == 1.0f ? 1.0f : 0.0f;
    bad += correct[i] < 0.0f ? 1.0f : 0.0f;
  }
  l = BlockSum(l);
  ok = BlockSum(ok);
  bad = BlockSum(bad);
  if (threadIdx.x == 0) {
    out[0] = l * loss_scale;
    out[1] = ok;
    out[2] = bad;
  }
}

}  // namespace

cudaError_t SoftmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t B, int64_t C,
                                float grad_scale, float* grad, float* row_loss, float* row_correct,
                                cudaStream_t s) {
  if (B == 0) return cudaSuccess;
  const int64_t blocks = (B + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
      logits, labels, B, C, grad_scale, grad, row_loss, row_correct);
  return cudaGetLastError();
}

cudaError_t SigmoidBinaryCrossEntropy(const float* logits, const float* targets, int64_t n,
                                      float grad_scale, float* grad, float* loss, float* correct,
                                      cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  SigmoidBceKernel<<<GridFor(n), kThreads, 0, s>>>(logits, targets, n, grad_scale, grad, loss, correct);
  return cudaGetLastError();
}

cudaError_t ReduceLossStats(const float* loss, const float* correct, int64_t n, float loss_scale,
                            float* out, cudaStream_t s) {
  ReduceLossStatsKernel<<<1, 1024, 0, s>>>(loss, correct, n, loss_scale, out);
  return cudaGetLastError();
}

}  // namespace pl::cuda::kernels
