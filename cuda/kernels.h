// Raw launchers of this library's own CUDA kernels: device pointers, sizes and a
// stream in, cudaGetLastError() of the launch out. Internal to pl_cuda: the public
// ops (*_ops.h) check tensors and shapes, then call these. Kept free of Eigen and
// abseil so the .cu files compile in about a second each.
//
// Dimension legend: n = element count, B = batch rows, C = classes or channels,
// D = embedding dim, N = looked-up ids, U = unique ids.
// `accumulate`: false writes the result, true adds it to what is there.
#ifndef PADDLE_LIKE_CUDA_KERNELS_H_
#define PADDLE_LIKE_CUDA_KERNELS_H_

#include <cstdint>

#include <cuda_runtime.h>

namespace pl::cuda::kernels {

// ---- activation_kernels.cu: activations, bias, scaling ----
enum class Activation : int { kRelu = 0, kSigmoid = 1, kTanh = 2 };
// y (n) = f(x (n))
cudaError_t ActivationForward(Activation act, const float* x, float* y, int64_t n, cudaStream_t s);
// gx (n) (+)= f'(from y) * gy; uses the saved output y like the CPU layers.
cudaError_t ActivationBackward(Activation act, const float* y, const float* gy, float* gx, int64_t n,
                               bool accumulate, cudaStream_t s);
// y (outer, C, inner) += b (C)
cudaError_t BiasAdd(float* y, const float* b, int64_t outer, int64_t C, int64_t inner, cudaStream_t s);
// db (C) (+)= sum over outer and inner of gy (outer, C, inner); deterministic.
cudaError_t BiasGrad(const float* gy, float* db, int64_t outer, int64_t C, int64_t inner,
                     bool accumulate, cudaStream_t s);
// x (n) *= alpha
cudaError_t Scale(float* x, int64_t n, float alpha, cudaStream_t s);

// ---- dropout_kernels.cu ----
// Inverted dropout with the CPU layer's counter-based mask: element i is kept iff
// (MixSeed(stream_seed, i) >> 40) >= threshold, and scaled by `scale`. The mask is
// recomputed in backward, never stored.
cudaError_t DropoutForward(const float* x, float* y, int64_t n, uint64_t stream_seed,
                           uint32_t threshold, float scale, cudaStream_t s);
cudaError_t DropoutBackward(const float* gy, float* gx, int64_t n, uint64_t stream_seed,
                            uint32_t threshold, float scale, bool accumulate, cudaStream_t s);

// ---- loss_kernels.cu ----
// Softmax cross-entropy of logits (B, C) against labels (B) in [0, C):
// row_loss (B) = logsumexp - logit[label]; row_correct (B) = 1 if argmax == label
// (first maximum on ties); grad (B, C) = (softmax - onehot) * grad_scale (grad may be
// null). A label out of range gives loss 0, grad 0 and row_correct = -1.
cudaError_t SoftmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t B, int64_t C,
                                float grad_scale, float* grad, float* row_loss, float* row_correct,
                                cudaStream_t s);
// Sigmoid binary cross-entropy of logits (n) against targets (n) in [0, 1]:
// loss (n) = max(x, 0) - x t + log(1 + exp(-|x|)); correct (n) = (x > 0) == (t > 0.5);
// grad (n) = (sigmoid(x) - t) * grad_scale (may be null).
cudaError_t SigmoidBinaryCrossEntropy(const float* logits, const float* targets, int64_t n,
                                      float grad_scale, float* grad, float* loss, float* correct,
                                      cudaStream_t s);
// out[0] = sum(loss) * loss_scale, out[1] = number of correct == 1, out[2] = number of
// correct < 0 (invalid labels). One block, fixed order: deterministic.
cudaError_t ReduceLossStats(const float* loss, const float* correct, int64_t n, float loss_scale,
                            float* out, cudaStream_t s);

// ---- embedding_kernels.cu ----
// out (N, D) = rows (U, D)[slots (N)]
cudaError_t EmbeddingGather(const float* rows, const int64_t* slots, float* out, int64_t N,
                            int64_t D, cudaStream_t s);
// grad (U, D) (+)= for each u, sum of gy (N, D) rows at positions[offsets[u] .. offsets[u+1]),
// summed in position order (deterministic, no atomics).
cudaError_t EmbeddingSegmentSum(const float* gy, const int64_t* positions, const int64_t* offsets,
                                float* grad, int64_t U, int64_t D, bool accumulate, cudaStream_t s);

// ---- optimizer_kernels.cu: update_rules.h's formulas, state slot-major ----
cudaError_t SgdUpdate(float* p, const float* g, int64_t n, float lr, float wd, cudaStream_t s);
cudaError_t MomentumUpdate(float* p, const float* g, float* v, int64_t n, float lr, float mu,
                           float wd, cudaStream_t s);
cudaError_t AdagradUpdate(float* p, const float* g, float* a, int64_t n, float lr, float eps,
                          float wd, cudaStream_t s);
// c1 = 1 / (1 - b1^t), c2 = 1 / (1 - b2^t), computed by the caller in double.
cudaError_t AdamUpdate(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                       float b1, float b2, float eps, float wd, float c1, float c2, cudaStream_t s);

}  // namespace pl::cuda::kernels

#endif  // PADDLE_LIKE_CUDA_KERNELS_H_
