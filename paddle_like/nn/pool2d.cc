#include "paddle_like/nn/pool2d.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace pl {

std::string MaxPool2D::Describe() const {
  return absl::StrCat("MaxPool2D(kernel=", kernel_, ", stride=", stride_, ")");
}

StatusOr<Variable> MaxPool2D::Forward(const Variable& x) {
  if (kernel_ <= 0 || stride_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": kernel and stride must be positive"));
  }
  const Tensor& xv = x.value();
  if (!xv.defined() || xv.dtype() != DType::kFloat32 || xv.device() != Device::kCPU ||
      xv.rank() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(), ": expects a float32 CPU input of shape [N, C, H, W], got ",
        xv.defined() ? DTypeName(xv.dtype()) : "undefined", " ", xv.ShapeString()));
  }
  const int64_t N = xv.dim(0), C = xv.dim(1), H = xv.dim(2), W = xv.dim(3);
  if (H < kernel_ || W < kernel_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": input ", xv.ShapeString(), " is smaller than the kernel"));
  }
  if (H * W > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": input plane of ", xv.ShapeString(), " exceeds 2^31 elements"));
  }
  const int64_t Ho = (H - kernel_) / stride_ + 1, Wo = (W - kernel_) / stride_ + 1;
  const int64_t planes = N * C, in_plane = H * W, out_plane = Ho * Wo;
  Tensor y({N, C, Ho, Wo}, DType::kFloat32);
  // argmax[i]: offset inside its input plane of the maximum for output element i.
  auto argmax = std::make_shared<std::vector<int32_t>>(planes * out_plane);
  const int64_t k = kernel_, s = stride_;
  for (int64_t p = 0; p < planes; ++p) {
    const float* in = xv.f32() + p * in_plane;
    float* out = y.f32() + p * out_plane;
    int32_t* arg = argmax->data() + p * out_plane;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t best = oh * s * W + ow * s;
        float best_v = in[best];
        for (int64_t i = 0; i < k; ++i) {
          const int64_t row = (oh * s + i) * W + ow * s;
          for (int64_t j = 0; j < k; ++j) {
            // Branch-free select: which element wins is data-dependent and unpredictable.
            const float v = in[row + j];
            const bool gt = v > best_v;
            best_v = gt ? v : best_v;
            best = gt ? row + j : best;
          }
        }
        out[oh * Wo + ow] = best_v;
        arg[oh * Wo + ow] = static_cast<int32_t>(best);
      }
    }
  }
  return Variable::FromOp(y, {x}, [x, argmax, planes, in_plane, out_plane](const Tensor& gy) {
    if (!x.requires_grad()) return;
    float* dx = x.MutableGrad().f32();
    for (int64_t p = 0; p < planes; ++p) {
      const int32_t* arg = argmax->data() + p * out_plane;
      const float* g = gy.f32() + p * out_plane;
      float* d = dx + p * in_plane;
      for (int64_t i = 0; i < out_plane; ++i) d[arg[i]] += g[i];
    }
  });
}

StatusOr<Variable> MaxPool2dOp(const Variable& x, int64_t kernel, int64_t stride) {
  if (!x.defined()) return absl::InvalidArgumentError("max_pool2d: input is undefined");
  return MaxPool2D(kernel, stride).Forward(x);
}

}  // namespace pl
