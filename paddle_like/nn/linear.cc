#include "paddle_like/nn/linear.h"

#include "paddle_like/nn/tensor_checks.h"

namespace pl {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : Layer("Linear"), in_(in_features), out_(out_features) {
  w_ = RegisterDense("w", {in_, out_}, InitSpec::Glorot(in_, out_));
  if (bias) b_ = RegisterDense("b", {out_}, InitSpec::Zeros());
}

StatusOr<Variable> Linear::Forward(const Variable& x) {
  const Tensor& xv = x.value();
  if (xv.rank() != 2 || xv.dim(1) != in_ || xv.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear(", in_, " -> ", out_, "): expects float32 input of shape [batch, ",
                     in_, "], got ", DTypeName(xv.dtype()), " ", xv.ShapeString()));
  }
  const int64_t batch = xv.dim(0);
  Tensor y({batch, out_}, DType::kFloat32);
  y.matrix().noalias() = xv.matrix() * w_.value().matrix();
  if (b_.defined()) y.matrix().rowwise() += b_.value().flat().transpose();

  Variable w = w_, b = b_;
  std::vector<Variable> inputs{x, w_};
  if (b_.defined()) inputs.push_back(b_);
  return Variable::FromOp(y, std::move(inputs), [x, w, b](const Tensor& gy) {
    // dW = x^T gy, db = sum_rows gy, dx = gy W^T
    if (w.requires_grad()) {
      w.MutableGrad().matrix().noalias() += x.value().matrix().transpose() * gy.matrix();
    }
    if (b.defined() && b.requires_grad()) {
      b.MutableGrad().flat() += gy.matrix().colwise().sum().transpose();
    }
    if (x.requires_grad()) {
      x.MutableGrad().matrix().noalias() += gy.matrix() * w.value().matrix().transpose();
    }
  });
}

StatusOr<Variable> LinearOp(const Variable& x, const Variable& weight, const Variable& bias) {
  for (const Variable* v : {&x, &weight}) {
    if (!v->defined()) return absl::InvalidArgumentError("linear: an operand is undefined");
    PL_RETURN_IF_ERROR(internal::CheckFloatCpu(v->value(), "linear"));
  }
  const Tensor& xv = x.value();
  const Tensor& wv = weight.value();
  const bool has_bias = bias.defined();
  if (has_bias) PL_RETURN_IF_ERROR(internal::CheckFloatCpu(bias.value(), "linear bias"));
  if (xv.rank() < 1 || wv.rank() != 2 || xv.dim(-1) != wv.dim(1) ||
      (has_bias && (bias.value().rank() != 1 || bias.value().dim(0) != wv.dim(0)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linear: expects x (..., in), weight (out, in) and bias (out), got x ", xv.ShapeString(),
        ", weight ", wv.ShapeString(), ", bias ", has_bias ? bias.value().ShapeString() : "None"));
  }
  const int64_t in = wv.dim(1), out = wv.dim(0), rows = in == 0 ? 0 : xv.numel() / in;
  Shape out_shape = xv.shape();
  out_shape.back() = out;
  Tensor y(out_shape, DType::kFloat32);
  MatrixMap ym(y.f32(), rows, out);
  const ConstMatrixMap xm(xv.f32(), rows, in), wm(wv.f32(), out, in);
  ym.noalias() = xm * wm.transpose();
  if (has_bias) ym.rowwise() += bias.value().flat().transpose();

  std::vector<Variable> inputs{x, weight};
  if (has_bias) inputs.push_back(bias);
  return Variable::FromOp(y, std::move(inputs), [x, weight, bias, rows, in, out](const Tensor& gy) {
    // dW = gy^T x, db = sum_rows gy, dx = gy W
    const ConstMatrixMap g(gy.f32(), rows, out);
    if (weight.requires_grad()) {
      MatrixMap(weight.MutableGrad().f32(), out, in).noalias() +=
          g.transpose() * ConstMatrixMap(x.value().f32(), rows, in);
    }
    if (bias.defined() && bias.requires_grad()) bias.MutableGrad().flat() += g.colwise().sum().transpose();
    if (x.requires_grad()) {
      MatrixMap(x.MutableGrad().f32(), rows, in).noalias() +=
          g * ConstMatrixMap(weight.value().f32(), out, in);
    }
  });
}

}  // namespace pl
