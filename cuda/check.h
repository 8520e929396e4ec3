// Precondition checks shared by the GPU ops (internal to pl_cuda): every op checks
// its tensors before launching anything and names the op, the tensor's role and
// what it got, e.g. "LinearForward: w must be a float32 CUDA tensor of shape
// [784, 512], got float32 CUDA [512, 784]".
#ifndef PADDLE_LIKE_CUDA_CHECK_H_
#define PADDLE_LIKE_CUDA_CHECK_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/tensor.h"

namespace pl::cuda::internal {

inline std::string Describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return absl::StrCat(DTypeName(t.dtype()), t.device() == Device::kCUDA ? " CUDA " : " CPU ",
                      t.ShapeString());
}

// `t` is defined, on the GPU, of `dtype`.
inline Status CheckGpu(const Tensor& t, DType dtype, absl::string_view op, absl::string_view role) {
  if (!t.defined() || t.device() != Device::kCUDA || t.dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", role, " must be a ", DTypeName(dtype),
                                                   " CUDA tensor, got ", Describe(t)));
  }
  return absl::OkStatus();
}

// As CheckGpu, and of exactly `shape`.
inline Status CheckGpu(const Tensor& t, DType dtype, const Shape& shape, absl::string_view op,
                       absl::string_view role) {
  if (!t.defined() || t.device() != Device::kCUDA || t.dtype() != dtype || t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", role, " must be a ", DTypeName(dtype),
                                                   " CUDA tensor of shape ", ShapeToString(shape),
                                                   ", got ", Describe(t)));
  }
  return absl::OkStatus();
}

}  // namespace pl::cuda::internal

#endif  // PADDLE_LIKE_CUDA_CHECK_H_
