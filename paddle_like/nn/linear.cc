#include "paddle_like/nn/linear.h"

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

}  // namespace pl
