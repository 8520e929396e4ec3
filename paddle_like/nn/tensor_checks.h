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

}  // namespace pl::internal

#endif  // PADDLE_LIKE_NN_TENSOR_CHECKS_H_
