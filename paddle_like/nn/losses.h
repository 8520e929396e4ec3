// Loss functions (scalar, mean over the batch) and prediction helpers.
// Legend: B batch size, K number of classes.
//
//   PL_ASSIGN_OR_RETURN(Variable loss, SoftmaxCrossEntropy(logits, labels));
//   PL_RETURN_IF_ERROR(loss.Backward());
//
// The losses return a rank-0 Variable (numel 1), so Backward() needs no seed. Both
// use the numerically stable forms (log-sum-exp; softplus with |z|), so large logits
// give finite losses and gradients.
//
// Thread-safety: pure functions of their arguments.
#ifndef PADDLE_LIKE_NN_LOSSES_H_
#define PADDLE_LIKE_NN_LOSSES_H_

#include <cstdint>
#include <string>

#include "paddle_like/core/variable.h"

namespace pl {

// mean_b( logsumexp(logits[b, :]) - logits[b, labels[b]] ).
//   logits: float32 (B, K)   labels: int64 (B), each in [0, K)
StatusOr<Variable> SoftmaxCrossEntropy(const Variable& logits, const Tensor& labels);

// mean_b( max(z, 0) - z*t + log(1 + exp(-|z|)) ), z = logits[b], t = labels[b].
//   logits: float32 (B) or (B, 1)   labels: float32 (B), each in [0, 1]
StatusOr<Variable> SigmoidBinaryCrossEntropy(const Variable& logits, const Tensor& labels);

// torch's `reduction`: the mean or the sum over every element (or row), or none (the
// per-element or per-row losses, same shape as the input / (B)).
enum class Reduction : uint8_t { kMean = 0, kSum = 1, kNone = 2 };
// "mean" | "sum" | "none"; INVALID_ARGUMENT naming the three otherwise.
StatusOr<Reduction> ParseReduction(const std::string& name);

// (pred - target)^2, reduced. pred, target: float32, same shape (any); both may
// require a gradient.
StatusOr<Variable> MSELoss(const Variable& pred, const Variable& target,
                           Reduction reduction = Reduction::kMean);
// |pred - target|, reduced; the gradient at pred == target is 0 (as torch).
StatusOr<Variable> L1Loss(const Variable& pred, const Variable& target,
                          Reduction reduction = Reduction::kMean);
// -log_probs[b, target[b]], reduced over the rows whose target is not ignore_index
// (the mean divides by their count; torch's default ignore_index is -100).
//   log_probs: float32 (B, C)   target: int64 (B), each in [0, C) or ignore_index
StatusOr<Variable> NLLLoss(const Variable& log_probs, const Tensor& target,
                           Reduction reduction = Reduction::kMean, int64_t ignore_index = -100);

// Row-wise softmax of float32 (B, K) (a rank-1 tensor is one row); same shape.
Tensor Softmax(const Tensor& logits);
// Element-wise logistic function, any shape; keeps full relative precision for
// very negative logits (no rounding to 0 near -17), so scores stay rankable.
Tensor SigmoidOf(const Tensor& logits);

namespace internal {
// The logistic function of an Eigen array, with exp(-|x|) so that nothing overflows:
// x >= 0: 1 / (1 + e),  x < 0: e / (1 + e).
template <typename In>
Eigen::ArrayXf StableSigmoid(const Eigen::ArrayBase<In>& x) {
  Eigen::ArrayXf e = (-x.abs()).exp();
  return (x >= 0.0f).select(1.0f / (1.0f + e), e / (1.0f + e));
}
}  // namespace internal

// How many rows are predicted right.
//   logits (B, K), K > 1, labels int64 (B): argmax (first on ties) == label.
//   logits (B) or (B, 1), labels int64 or float32 (B): (logit > 0) == (label > 0.5).
// Returns -1 when the shapes or dtypes do not fit together.
int64_t CountCorrect(const Tensor& logits, const Tensor& labels);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_LOSSES_H_
