#include "paddle_like/nn/elementwise_ops.h"

#include <cmath>
#include <string>

#include "paddle_like/nn/tensor_checks.h"

namespace pl::functional {
namespace {

using Array = Eigen::Map<Eigen::ArrayXf>;

// y = fwd(x); on backward dx += bwd(x, y, gy). Both take Eigen arrays (vectorised).
template <typename Fwd, typename Bwd>
StatusOr<Variable> Unary(const Variable& a, const std::string& op, Fwd fwd, Bwd bwd) {
  if (!a.defined()) return absl::InvalidArgumentError(op + ": input is undefined");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(a.value(), op));
  const int64_t n = a.value().numel();
  Tensor y(a.shape(), DType::kFloat32);
  Array(y.f32(), n) = fwd(Array(a.value().f32(), n));
  return Variable::FromOp(y, {a}, [a, y, n, bwd](const Tensor& gy) {
    if (!a.requires_grad()) return;
    Array(a.MutableGrad().f32(), n) += bwd(Array(a.value().f32(), n), Array(y.f32(), n), Array(gy.f32(), n));
  });
}

}  // namespace

StatusOr<Variable> Exp(const Variable& a) {
  return Unary(a, "exp", [](const Array& x) { return x.exp(); },
               [](const Array&, const Array& y, const Array& g) { return g * y; });
}

StatusOr<Variable> Log(const Variable& a) {
  return Unary(a, "log", [](const Array& x) { return x.log(); },
               [](const Array& x, const Array&, const Array& g) { return g / x; });
}

StatusOr<Variable> Pow(const Variable& a, float p) {
  return Unary(a, absl::StrCat("pow(exponent=", p, ")"), [p](const Array& x) { return x.pow(p); },
               [p](const Array& x, const Array&, const Array& g) -> Eigen::ArrayXf {
                 if (p == 0.0f) return Eigen::ArrayXf::Zero(x.size());
                 return g * p * x.pow(p - 1.0f);
               });
}

StatusOr<Variable> Abs(const Variable& a) {
  return Unary(a, "abs", [](const Array& x) { return x.abs(); },
               [](const Array& x, const Array&, const Array& g) { return g * x.sign(); });
}

StatusOr<Variable> Clamp(const Variable& a, std::optional<float> min, std::optional<float> max) {
  const float lo = min.value_or(-std::numeric_limits<float>::infinity());
  const float hi = max.value_or(std::numeric_limits<float>::infinity());
  const std::string op = absl::StrCat("clamp(min=", min ? absl::StrCat(*min) : "None",
                                      ", max=", max ? absl::StrCat(*max) : "None", ")");
  if (!min && !max) return absl::InvalidArgumentError(op + ": at least one of min and max is needed");
  // torch: a NaN input stays NaN; min > max gives max everywhere.
  return Unary(a, op,
               [lo, hi](const Array& x) -> Eigen::ArrayXf {
                 return (x != x).select(x, x.max(lo).min(hi));
               },
               [lo, hi](const Array& x, const Array&, const Array& g) {
                 return ((x >= lo) && (x <= hi)).select(g, 0.0f);
               });
}

StatusOr<Variable> Sqrt(const Variable& a) {
  return Unary(a, "sqrt", [](const Array& x) { return x.sqrt(); },
               [](const Array&, const Array& y, const Array& g) { return g / (2.0f * y); });
}

StatusOr<Variable> Div(const Variable& a, const Variable& b) {
  for (const Variable* v : {&a, &b}) {
    if (!v->defined()) return absl::InvalidArgumentError("div: an operand is undefined");
    PL_RETURN_IF_ERROR(internal::CheckFloatCpu(v->value(), "div"));
  }
  if (a.shape() != b.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("div: shapes ", a.value().ShapeString(), " and ",
                                                   b.value().ShapeString(), " differ (no broadcasting)"));
  }
  const int64_t n = a.value().numel();
  Tensor y(a.shape(), DType::kFloat32);
  Array(y.f32(), n) = Array(a.value().f32(), n) / Array(b.value().f32(), n);
  return Variable::FromOp(y, {a, b}, [a, b, y, n](const Tensor& gy) {
    const Array g(gy.f32(), n), bv(b.value().f32(), n);
    if (a.requires_grad()) Array(a.MutableGrad().f32(), n) += g / bv;
    // d(a/b)/db = -(a/b) / b
    if (b.requires_grad()) Array(b.MutableGrad().f32(), n) -= g * Array(y.f32(), n) / bv;
  });
}

}  // namespace pl::functional
