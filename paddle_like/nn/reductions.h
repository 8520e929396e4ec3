// Reductions and normalisations along one dimension of a float32 CPU tensor of any
// rank (torch.sum/mean/max/argmax with `dim`, softmax, log_softmax). A negative dim
// counts from the end. Legend: around dimension d a tensor is (outer, n, inner), outer
// the product of the dims before d, inner of those after it. With keepdim the reduced
// dimension stays as size 1, otherwise it is removed.
//
//   SumDim(a, d), MeanDim(a, d):  (..., n, ...) -> (..., ...)
//   MaxDim(a, d):                 values (differentiable, the gradient goes to the first
//                                 maximum) and int64 indices (the first maximum; a NaN
//                                 counts as the maximum, as in torch)
//   ArgMax(a, d):                 int64 indices, no gradient; no dim: the index into
//                                 the flattened tensor (shape [], or all ones with keepdim)
//   Softmax(a, d), LogSoftmax(a, d): same shape; max-subtracted, so large inputs are finite
//
// Thread-safety: pure functions of their arguments (see Variable for graphs).
#ifndef PADDLE_LIKE_NN_REDUCTIONS_H_
#define PADDLE_LIKE_NN_REDUCTIONS_H_

#include <optional>

#include "paddle_like/core/variable.h"

namespace pl::functional {

StatusOr<Variable> SumDim(const Variable& a, int dim, bool keepdim = false);
StatusOr<Variable> MeanDim(const Variable& a, int dim, bool keepdim = false);

struct MaxDimResult {
  Variable values;  // float32, the reduced shape
  Tensor indices;   // int64, the reduced shape
};
StatusOr<MaxDimResult> MaxDim(const Variable& a, int dim, bool keepdim = false);

// Also takes int64 tensors.
StatusOr<Tensor> ArgMax(const Tensor& a, std::optional<int> dim, bool keepdim = false);

StatusOr<Variable> Softmax(const Variable& a, int dim);
StatusOr<Variable> LogSoftmax(const Variable& a, int dim);

}  // namespace pl::functional

#endif  // PADDLE_LIKE_NN_REDUCTIONS_H_
