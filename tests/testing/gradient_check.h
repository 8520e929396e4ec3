// Finite-difference gradient checks for layers and ops. The checked function maps
// Variables to a Variable; the scalar objective is sum(out * R) for a fixed random R,
// so every output element's gradient is exercised with a distinct weight.
#ifndef PADDLE_LIKE_TESTS_TESTING_GRADIENT_CHECK_H_
#define PADDLE_LIKE_TESTS_TESTING_GRADIENT_CHECK_H_

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "paddle_like/core/variable.h"

namespace pl::testing {

inline Tensor RandomTensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(shape, DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng);
  return t;
}

// Compares analytic gradients of `fn` at `inputs` (each requires_grad) and at every
// tensor in `extra` (e.g. a layer's parameter values, whose grads live in
// `extra_grads()` after backward) against central differences in double-ish
// precision. Reports the worst element.
struct GradientCheckOptions {
  float step = 1e-2f;
  float abs_tol = 2e-3f;
  float rel_tol = 2e-2f;
};

using VarFn = std::function<StatusOr<Variable>(const std::vector<Variable>&)>;

// `params`: extra leaves (e.g. layer parameters) whose .grad() is compared too; they
// must be zeroed before the call.
inline void ExpectGradientsMatch(const VarFn& fn, const std::vector<Variable>& inputs,
                                 const std::vector<Variable>& params = {},
                                 GradientCheckOptions opt = {}) {
  auto first = fn(inputs);
  ASSERT_TRUE(first.ok()) << first.status();
  const Tensor weights = RandomTensor(first->shape(), 1234);
  auto objective = [&]() -> double {
    auto out = fn(inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    double s = 0;
    for (int64_t i = 0; i < out->value().numel(); ++i) {
      s += static_cast<double>(out->value().f32()[i]) * weights.f32()[i];
    }
    return s;
  };
  for (const Variable& p : params) p.ZeroGrad();
  for (const Variable& v : inputs) v.ZeroGrad();
  ASSERT_TRUE(first->requires_grad());
  ASSERT_TRUE(first->Backward(weights).ok());

  std::vector<Variable> all = inputs;
  all.insert(all.end(), params.begin(), params.end());
  for (size_t k = 0; k < all.size(); ++k) {
    const Variable& v = all[k];
    if (!v.requires_grad()) continue;
    ASSERT_TRUE(v.grad().defined()) << "no gradient reached leaf " << k;
    const Tensor analytic = v.grad().Clone();
    float* x = v.value().f32();
    for (int64_t i = 0; i < v.value().numel(); ++i) {
      const float saved = x[i];
      x[i] = saved + opt.step;
      const double up = objective();
      x[i] = saved - opt.step;
      const double down = objective();
      x[i] = saved;
      const double numeric = (up - down) / (2.0 * opt.step);
      const double a = analytic.f32()[i];
      const double tol = opt.abs_tol + opt.rel_tol * std::max(std::abs(a), std::abs(numeric));
      ASSERT_NEAR(a, numeric, tol) << "leaf " << k << " element " << i << " of shape "
                                   << v.value().ShapeString();
    }
  }
}

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_TESTING_GRADIENT_CHECK_H_
