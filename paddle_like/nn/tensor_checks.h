// Internal helper for the layers: the float32-on-CPU input check, with an error that
// names the op and the offending tensor. Not part of the public API (nn.h).
//
// Why the element-wise layers (ReLU, Dropout, pooling) run on the calling thread:
// they are memory-bound, so a second core buys little, while each OpenMP region costs
// a wake-up and a barrier; on a machine shared by trainers and parameter servers that
// cost measured 4-8x the serial time (ReLU over 1.6M floats: 1.4 ms serial, 12 ms with
// two threads under load). Only the compute-bound convolution uses OpenMP.
#ifndef PADDLE_LIKE_NN_TENSOR_CHECKS_H_
#define PADDLE_LIKE_NN_TENSOR_CHECKS_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "paddle_like/core/tensor.h"

namespace pl::internal {

inline Status CheckFloatCpu(const Tensor& t, absl::string_view op) {
  if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat(op, ": input is undefined"));
  if (t.dtype() != DType::kFloat32 || t.device() != Device::kCPU) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expects a float32 CPU tensor, got ",
                                                   DTypeName(t.dtype()),
                                                   t.device() == Device::kCPU ? " " : " CUDA ",
                                                   t.ShapeString()));
  }
  return absl::OkStatus();
}

// `dim` counted from the end when negative, checked against `rank`; a rank-0 tensor
// takes dim 0 or -1, as in torch. Errors name the op and the shape.
inline StatusOr<int> NormalizeDim(int dim, const Tensor& t, absl::string_view op) {
  const int rank = t.rank() == 0 ? 1 : t.rank();
  if (dim < -rank || dim >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": dim ", dim, " is out of range for shape ",
                                                   t.ShapeString(), " (rank ", t.rank(), ")"));
  }
  return dim < 0 ? dim + rank : dim;
}

// A tensor seen around dimension `dim` as (outer, n, inner): outer is the product of
// the dims before it, n its size, inner the product of the dims after it.
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit SplitAt(const Shape& shape, int dim) {
  DimSplit s;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (i < dim) s.outer *= shape[i];
    if (i == dim) s.n = shape[i];
    if (i > dim) s.inner *= shape[i];
  }
  return s;
}

}  // namespace pl::internal

#endif  // PADDLE_LIKE_NN_TENSOR_CHECKS_H_
