#include "paddle_like/nn/activations.h"

#include <cmath>

#include "paddle_like/nn/tensor_checks.h"
#include "paddle_like/nn/losses.h"

namespace pl {
namespace {

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using internal::StableSigmoid;

// Runs y = f(x) element-wise, and on backward dx += g(y, gy); both are given Eigen
// arrays so they vectorise. Serial on purpose: see tensor_checks.h.
template <typename Fwd, typename Bwd>
StatusOr<Variable> Elementwise(const Variable& x, absl::string_view op, Fwd fwd, Bwd bwd) {
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  const Tensor& xv = x.value();
  Tensor y(xv.shape(), DType::kFloat32);
  const int64_t n = xv.numel();
  ArrayMap out(y.f32(), n);
  fwd(ArrayMap(xv.f32(), n), out);
  return Variable::FromOp(y, {x}, [x, y, bwd, n](const Tensor& gy) {
    if (!x.requires_grad()) return;
    ArrayMap dx(x.MutableGrad().f32(), n);
    bwd(ArrayMap(y.f32(), n), ArrayMap(gy.f32(), n), dx);
  });
}

}  // namespace

StatusOr<Variable> ApplyRelu(const Variable& x) {
  return Elementwise(
      x, "ReLU", [](const ArrayMap& in, ArrayMap& out) { out = in.max(0.0f); },
      [](const ArrayMap& y, const ArrayMap& gy, ArrayMap& dx) {
        dx += (y > 0.0f).select(gy, 0.0f);
      });
}

StatusOr<Variable> ApplySigmoid(const Variable& x) {
  return Elementwise(
      x, "Sigmoid",
      [](const ArrayMap& in, ArrayMap& out) { out = StableSigmoid(in); },
      [](const ArrayMap& y, const ArrayMap& gy, ArrayMap& dx) { dx += gy * y * (1.0f - y); });
}

StatusOr<Variable> ApplyTanh(const Variable& x) {
  return Elementwise(
      x, "Tanh", [](const ArrayMap& in, ArrayMap& out) { out = in.tanh(); },
      [](const ArrayMap& y, const ArrayMap& gy, ArrayMap& dx) { dx += gy * (1.0f - y.square()); });
}

StatusOr<Variable> ApplyGelu(const Variable& x) {
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), "GELU"));
  const Tensor& xv = x.value();
  const int64_t n = xv.numel();
  Tensor y(xv.shape(), DType::kFloat32);
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = xv.f32()[i];
    y.f32()[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  }
  return Variable::FromOp(y, {x}, [x, n](const Tensor& gy) {
    if (!x.requires_grad()) return;
    // dy/dx = Phi(x) + x phi(x), Phi the normal CDF and phi its density.
    constexpr float kInvSqrt2Pi = 0.39894228040143268f;
    const float* in = x.value().f32();
    float* dx = x.MutableGrad().f32();
    for (int64_t i = 0; i < n; ++i) {
      const float v = in[i];
      const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
      dx[i] += gy.f32()[i] * (cdf + v * kInvSqrt2Pi * std::exp(-0.5f * v * v));
    }
  });
}

}  // namespace pl
