// Max pooling on the GPU through cuDNN, NCHW, no padding — paddle_like/nn/pool2d.h:
//   x: (N, C, H, W) -> y: (N, C, Ho, Wo),  Ho = (H - kernel) / stride + 1.
// Backward routes each output's gradient to the input that was the window's maximum
// (cuDNN's deterministic max mode). On exact ties the CPU layer picks the first
// element in row-major order; cuDNN may pick another, so the two agree whenever the
// maximum is unique (after a ReLU, all-zero windows tie but their gradient is then
// stopped by the ReLU either way).
//
// Thread-safety: a plan may be shared by threads; each call takes the caller's context.
#ifndef PADDLE_LIKE_CUDA_POOL_OPS_H_
#define PADDLE_LIKE_CUDA_POOL_OPS_H_

#include <memory>

#include "cuda/context.h"
#include "paddle_like/core/tensor.h"

namespace pl::cuda {

class MaxPoolPlan {
 public:
  // INVALID_ARGUMENT for a non-4-D shape, kernel/stride < 1 or a window larger than the input.
  static StatusOr<std::unique_ptr<MaxPoolPlan>> Create(const Shape& x_shape, int64_t kernel,
                                                       int64_t stride);
  ~MaxPoolPlan();
  MaxPoolPlan(const MaxPoolPlan&) = delete;
  MaxPoolPlan& operator=(const MaxPoolPlan&) = delete;

  const Shape& x_shape() const { return x_shape_; }
  const Shape& y_shape() const { return y_shape_; }
  Status Forward(const GpuContext& ctx, const Tensor& x, const Tensor& y) const;
  // dx = routed gy (written); needs the forward's x and y.
  Status Backward(const GpuContext& ctx, const Tensor& x, const Tensor& y, const Tensor& gy,
                  const Tensor& dx) const;

 private:
  MaxPoolPlan() = default;
  Shape x_shape_, y_shape_;
  int64_t kernel_ = 0, stride_ = 0;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_POOL_OPS_H_
