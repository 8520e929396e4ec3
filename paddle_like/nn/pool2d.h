// MaxPool2D: max over kernel x kernel windows of each NCHW plane, no padding.
//   x: (N, C, H, W) -> y: (N, C, Ho, Wo),  Ho = (H - kernel) / stride + 1 (floor).
// Backward routes each output's gradient to the input element that was the maximum
// (the first one in row-major order on ties); windows may overlap (stride < kernel).
//
// Thread-safety: see Module. Runs on the calling thread (memory-bound; see
// tensor_checks.h for why it does not use OpenMP).
#ifndef PADDLE_LIKE_NN_POOL2D_H_
#define PADDLE_LIKE_NN_POOL2D_H_

#include <string>

#include "paddle_like/nn/module.h"

namespace pl {

class MaxPool2D : public Layer {
 public:
  // `stride` 0 means stride = kernel (non-overlapping windows).
  explicit MaxPool2D(int64_t kernel, int64_t stride = 0)
      : Layer("MaxPool2D"), kernel_(kernel), stride_(stride == 0 ? kernel : stride) {}
  StatusOr<Variable> Forward(const Variable& x) override;
  int64_t kernel() const { return kernel_; }
  int64_t stride() const { return stride_; }
  // "MaxPool2D(kernel=2, stride=2)", used in errors.
  std::string Describe() const;

 private:
  int64_t kernel_, stride_;
};

// torch.nn.functional.max_pool2d (square kernel, no padding): the layer's computation.
// `stride` 0 means stride = kernel.
StatusOr<Variable> MaxPool2dOp(const Variable& x, int64_t kernel, int64_t stride = 0);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_POOL2D_H_
