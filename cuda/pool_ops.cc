#include "cuda/pool_ops.h"

#include <climits>

#include "absl/strings/str_format.h"
#include "cuda/check.h"
#include "cuda/dynamic_api.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

StatusOr<std::unique_ptr<MaxPoolPlan>> MaxPoolPlan::Create(const Shape& x, int64_t kernel, int64_t stride) {
  const std::string desc = absl::StrFormat("MaxPool(kernel=%d, stride=%d) of %s", kernel, stride,
                                           ShapeToString(x));
  if (x.size() != 4) return absl::InvalidArgumentError(desc + ": expects (N, C, H, W)");
  if (kernel < 1 || stride < 1 || x[2] < kernel || x[3] < kernel) {
    return absl::InvalidArgumentError(desc + ": the window must be >= 1 and fit in the input");
  }
  for (int64_t d : x) {
    if (d < 1 || d > INT_MAX) return absl::InvalidArgumentError(desc + ": sizes must be in [1, 2^31)");
  }
  std::unique_ptr<MaxPoolPlan> plan(new MaxPoolPlan);
  plan->x_shape_ = x;
  plan->y_shape_ = {x[0], x[1], (x[2] - kernel) / stride + 1, (x[3] - kernel) / stride + 1};
  plan->kernel_ = kernel;
  plan->stride_ = stride;
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  const Shape& y = plan->y_shape_;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreatePoolingDescriptor(&plan->pool_));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateTensorDescriptor(&plan->x_));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateTensorDescriptor(&plan->y_));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetPooling2dDescriptor(plan->pool_, CUDNN_POOLING_MAX_DETERMINISTIC,
                                                            CUDNN_PROPAGATE_NAN, i32(kernel), i32(kernel), 0, 0,
                                                            i32(stride), i32(stride)));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetTensor4dDescriptor(plan->x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(x[0]),
                                                           i32(x[1]), i32(x[2]), i32(x[3])));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetTensor4dDescriptor(plan->y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(y[0]),
                                                           i32(y[1]), i32(y[2]), i32(y[3])));
  return plan;
}

MaxPoolPlan::~MaxPoolPlan() {
  if (pool_) dyn::cudnnDestroyPoolingDescriptor(pool_);
  if (x_) dyn::cudnnDestroyTensorDescriptor(x_);
  if (y_) dyn::cudnnDestroyTensorDescriptor(y_);
}

Status MaxPoolPlan::Forward(const GpuContext& ctx, const Tensor& x, const Tensor& y) const {
  const std::string op = absl::StrFormat("MaxPoolForward(kernel=%d, stride=%d)", kernel_, stride_);
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, x_shape_, op, "x"));
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, y_shape_, op, "y"));
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnPoolingForward(ctx.cudnn(), pool_, &one, x_, x.f32(), &zero, y_, y.f32()));
  return absl::OkStatus();
}

Status MaxPoolPlan::Backward(const GpuContext& ctx, const Tensor& x, const Tensor& y, const Tensor& gy,
                             const Tensor& dx) const {
  const std::string op = absl::StrFormat("MaxPoolBackward(kernel=%d, stride=%d)", kernel_, stride_);
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, x_shape_, op, "x"));
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, y_shape_, op, "y"));
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, y_shape_, op, "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(dx, DType::kFloat32, x_shape_, op, "dx"));
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_RETURN_IF_ERROR(
      dyn::cudnnPoolingBackward(ctx.cudnn(), pool_, &one, y_, y.f32(), y_, gy.f32(), x_, x.f32(), &zero, x_, dx.f32()));
  return absl::OkStatus();
}

}  // namespace pl::cuda
