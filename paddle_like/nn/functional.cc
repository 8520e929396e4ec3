#include "paddle_like/nn/functional.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pl::functional {
namespace {

Status CheckFloat(const Variable& v, const std::string& op, const char* which) {
  if (!v.defined()) return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " is undefined"));
  const Tensor& t = v.value();
  if (t.dtype() != DType::kFloat32 || t.device() != Device::kCPU) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " must be a float32 CPU tensor, got ",
                                                   DTypeName(t.dtype()), " ", t.ShapeString()));
  }
  return absl::OkStatus();
}

Status CheckSameShape(const Variable& a, const Variable& b, const std::string& op) {
  PL_RETURN_IF_ERROR(CheckFloat(a, op, "left operand"));
  PL_RETURN_IF_ERROR(CheckFloat(b, op, "right operand"));
  if (a.shape() != b.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": shapes ", a.value().ShapeString(), " and ",
                                                   b.value().ShapeString(),
                                                   " differ (no broadcasting)"));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<Variable> Add(const Variable& a, const Variable& b, float alpha) {
  PL_RETURN_IF_ERROR(CheckSameShape(a, b, alpha == 1.0f ? "add" : "sub"));
  Tensor y(a.shape(), DType::kFloat32);
  y.flat() = a.value().flat() + alpha * b.value().flat();
  return Variable::FromOp(y, {a, b}, [a, b, alpha](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat() += gy.flat();
    if (b.requires_grad()) b.MutableGrad().flat() += alpha * gy.flat();
  });
}

StatusOr<Variable> Mul(const Variable& a, const Variable& b) {
  PL_RETURN_IF_ERROR(CheckSameShape(a, b, "mul"));
  Tensor y(a.shape(), DType::kFloat32);
  y.flat().array() = a.value().flat().array() * b.value().flat().array();
  return Variable::FromOp(y, {a, b}, [a, b](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat().array() += gy.flat().array() * b.value().flat().array();
    if (b.requires_grad()) b.MutableGrad().flat().array() += gy.flat().array() * a.value().flat().array();
  });
}

StatusOr<Variable> Affine(const Variable& a, float scale, float shift) {
  PL_RETURN_IF_ERROR(CheckFloat(a, "scale", "input"));
  Tensor y(a.shape(), DType::kFloat32);
  y.flat().array() = a.value().flat().array() * scale + shift;
  return Variable::FromOp(y, {a}, [a, scale](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat() += scale * gy.flat();
  });
}

StatusOr<Variable> Sum(const Variable& a) {
  PL_RETURN_IF_ERROR(CheckFloat(a, "sum", "input"));
  Tensor y = Tensor::Filled({}, a.value().flat().sum());
  return Variable::FromOp(y, {a}, [a](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat().array() += gy.f32()[0];
  });
}

StatusOr<Variable> Mean(const Variable& a) {
  PL_RETURN_IF_ERROR(CheckFloat(a, "mean", "input"));
  const int64_t n = a.value().numel();
  if (n == 0) return absl::InvalidArgumentError("mean: the input " + a.value().ShapeString() + " is empty");
  Tensor y = Tensor::Filled({}, a.value().flat().sum() / static_cast<float>(n));
  return Variable::FromOp(y, {a}, [a, n](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat().array() += gy.f32()[0] / static_cast<float>(n);
  });
}

StatusOr<Variable> Reshape(const Variable& a, const Shape& shape) {
  if (!a.defined()) return absl::InvalidArgumentError("reshape: input is undefined");
  auto view = a.value().Reshape(shape);
  if (!view.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("reshape: cannot view ", a.value().ShapeString(),
                                                   " as ", ShapeToString(shape)));
  }
  return Variable::FromOp(*view, {a}, [a](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().flat() += gy.flat();
  });
}

StatusOr<Variable> MatMul(const Variable& a, const Variable& b) {
  PL_RETURN_IF_ERROR(CheckFloat(a, "matmul", "left operand"));
  PL_RETURN_IF_ERROR(CheckFloat(b, "matmul", "right operand"));
  const Tensor& av = a.value();
  const Tensor& bv = b.value();
  if (av.rank() != 2 || bv.rank() != 2 || av.dim(1) != bv.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("matmul: expects (M, K) x (K, N), got ",
                                                   av.ShapeString(), " x ", bv.ShapeString()));
  }
  Tensor y({av.dim(0), bv.dim(1)}, DType::kFloat32);
  y.matrix().noalias() = av.matrix() * bv.matrix();
  return Variable::FromOp(y, {a, b}, [a, b](const Tensor& gy) {
    if (a.requires_grad()) a.MutableGrad().matrix().noalias() += gy.matrix() * b.value().matrix().transpose();
    if (b.requires_grad()) b.MutableGrad().matrix().noalias() += a.value().matrix().transpose() * gy.matrix();
  });
}

}  // namespace pl::functional
