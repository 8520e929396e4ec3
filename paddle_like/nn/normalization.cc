#include "paddle_like/nn/normalization.h"

#include <cmath>
#include <vector>

#include "paddle_like/nn/tensor_checks.h"

namespace pl {
namespace {

// Checks an optional per-feature tensor (weight, bias, running statistic) has `shape`.
Status CheckOptional(const Tensor& t, const Shape& shape, const std::string& op, const char* what) {
  if (!t.defined()) return absl::OkStatus();
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(t, absl::StrCat(op, " ", what)));
  if (t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " must have shape ",
                                                   ShapeToString(shape), ", got ", t.ShapeString()));
  }
  return absl::OkStatus();
}

const Tensor& ValueOrEmpty(const Variable& v) {
  static const Tensor* const kEmpty = new Tensor();
  return v.defined() ? v.value() : *kEmpty;
}

std::vector<Variable> Defined(std::initializer_list<Variable> vs) {
  std::vector<Variable> out;
  for (const Variable& v : vs) {
    if (v.defined()) out.push_back(v);
  }
  return out;
}

}  // namespace

StatusOr<Variable> LayerNormOp(const Variable& x, const Shape& normalized_shape,
                               const Variable& weight, const Variable& bias, float eps) {
  const std::string op = absl::StrCat("layer_norm(", ShapeToString(normalized_shape), ")");
  if (!x.defined()) return absl::InvalidArgumentError(op + ": input is undefined");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  const Tensor& xv = x.value();
  const int k = static_cast<int>(normalized_shape.size());
  bool fits = k >= 1 && xv.rank() >= k;
  for (int i = 0; fits && i < k; ++i) {
    fits = normalized_shape[i] > 0 && xv.dim(xv.rank() - k + i) == normalized_shape[i];
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expects an input whose last dims are ",
                                                   ShapeToString(normalized_shape), ", got ",
                                                   xv.ShapeString()));
  }
  PL_RETURN_IF_ERROR(CheckOptional(ValueOrEmpty(weight), normalized_shape, op, "weight"));
  PL_RETURN_IF_ERROR(CheckOptional(ValueOrEmpty(bias), normalized_shape, op, "bias"));
  const int64_t M = NumElements(normalized_shape), rows = xv.numel() / M;

  Tensor xhat(xv.shape(), DType::kFloat32);  // (rows, M), kept for backward
  Tensor rstd({rows}, DType::kFloat32);
  Tensor y(xv.shape(), DType::kFloat32);
  const ConstMatrixMap xm(xv.f32(), rows, M);
  MatrixMap hm(xhat.f32(), rows, M), ym(y.f32(), rows, M);
  for (int64_t r = 0; r < rows; ++r) {
    const double mean = xm.row(r).cast<double>().mean();
    const double var = (xm.row(r).cast<double>().array() - mean).square().mean();
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    rstd.f32()[r] = inv;
    hm.row(r) = (xm.row(r).array() - static_cast<float>(mean)) * inv;
  }
  ym = hm;
  if (weight.defined()) ym.array().rowwise() *= weight.value().flat().transpose().array();
  if (bias.defined()) ym.rowwise() += bias.value().flat().transpose();

  return Variable::FromOp(y, Defined({x, weight, bias}), [x, weight, bias, xhat, rstd, rows, M](const Tensor& gy) {
    const ConstMatrixMap g(gy.f32(), rows, M), h(xhat.f32(), rows, M);
    if (weight.defined() && weight.requires_grad()) {
      weight.MutableGrad().flat() += g.cwiseProduct(h).colwise().sum().transpose();
    }
    if (bias.defined() && bias.requires_grad()) bias.MutableGrad().flat() += g.colwise().sum().transpose();
    if (!x.requires_grad()) return;
    // dx = rstd * (dh - mean(dh) - h * mean(dh * h)), dh = gy * weight
    RowMatrix<float> dh = g;
    if (weight.defined()) dh.array().rowwise() *= weight.value().flat().transpose().array();
    MatrixMap dx(x.MutableGrad().f32(), rows, M);
    for (int64_t r = 0; r < rows; ++r) {
      const float mean_dh = dh.row(r).mean();
      const float mean_dhh = dh.row(r).cwiseProduct(h.row(r)).mean();
      dx.row(r).array() +=
          rstd.f32()[r] * (dh.row(r).array() - mean_dh - h.row(r).array() * mean_dhh);
    }
  });
}

StatusOr<Variable> BatchNormOp(const Variable& x, const Tensor& running_mean,
                               const Tensor& running_var, const Variable& weight,
                               const Variable& bias, bool training, float momentum, float eps) {
  const std::string op = "batch_norm";
  if (!x.defined()) return absl::InvalidArgumentError(op + ": input is undefined");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  const Tensor& xv = x.value();
  if (xv.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expects an input (N, C, ...), got ", xv.ShapeString()));
  }
  const int64_t N = xv.dim(0), C = xv.dim(1), L = C == 0 || N == 0 ? 0 : xv.numel() / (N * C);
  const Shape per_channel{C};
  PL_RETURN_IF_ERROR(CheckOptional(running_mean, per_channel, op, "running_mean"));
  PL_RETURN_IF_ERROR(CheckOptional(running_var, per_channel, op, "running_var"));
  PL_RETURN_IF_ERROR(CheckOptional(ValueOrEmpty(weight), per_channel, op, "weight"));
  PL_RETURN_IF_ERROR(CheckOptional(ValueOrEmpty(bias), per_channel, op, "bias"));
  if (running_mean.defined() != running_var.defined()) {
    return absl::InvalidArgumentError(op + ": give both running_mean and running_var, or neither");
  }
  const int64_t m = N * L;  // values per channel
  if (training && m <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected more than 1 value per channel when training, got input ", xv.ShapeString()));
  }
  if (!training && !running_mean.defined()) {
    return absl::InvalidArgumentError(op + ": evaluation mode needs running_mean and running_var");
  }

  // Per channel: the mean and 1/sqrt(var + eps) used to normalise.
  std::vector<float> mean(C);
  Tensor rstd({C}, DType::kFloat32);
  const float* in = xv.f32();
  for (int64_t c = 0; c < C; ++c) {
    double mu, var;
    if (training) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += ConstVectorMap(in + (n * C + c) * L, L).cast<double>().sum();
      mu = s / m;
      double q = 0;
      for (int64_t n = 0; n < N; ++n) {
        q += (ConstVectorMap(in + (n * C + c) * L, L).cast<double>().array() - mu).square().sum();
      }
      var = q / m;
      if (running_mean.defined()) {
        float& rm = running_mean.f32()[c];
        float& rv = running_var.f32()[c];
        rm = static_cast<float>((1.0 - momentum) * rm + momentum * mu);
        rv = static_cast<float>((1.0 - momentum) * rv + momentum * var * m / (m - 1));
      }
    } else {
      mu = running_mean.f32()[c];
      var = running_var.f32()[c];
    }
    mean[c] = static_cast<float>(mu);
    rstd.f32()[c] = static_cast<float>(1.0 / std::sqrt(var + eps));
  }
  Tensor xhat(xv.shape(), DType::kFloat32);
  Tensor y(xv.shape(), DType::kFloat32);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t off = (n * C + c) * L;
      VectorMap h(xhat.f32() + off, L);
      h.array() = (ConstVectorMap(in + off, L).array() - mean[c]) * rstd.f32()[c];
      const float w = weight.defined() ? weight.value().f32()[c] : 1.0f;
      const float b = bias.defined() ? bias.value().f32()[c] : 0.0f;
      VectorMap(y.f32() + off, L).array() = h.array() * w + b;
    }
  }

  return Variable::FromOp(y, Defined({x, weight, bias}), [x, weight, bias, xhat, rstd, training, N, C, L,
                                                           m](const Tensor& gy) {
    const bool want_w = weight.defined() && weight.requires_grad();
    const bool want_b = bias.defined() && bias.requires_grad();
    for (int64_t c = 0; c < C; ++c) {
      // Per channel sums of gy and gy * xhat over (N, L).
      double sum_g = 0, sum_gh = 0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t off = (n * C + c) * L;
        const ConstVectorMap g(gy.f32() + off, L), h(xhat.f32() + off, L);
        sum_g += g.sum();
        sum_gh += g.dot(h);
      }
      if (want_w) weight.MutableGrad().f32()[c] += static_cast<float>(sum_gh);
      if (want_b) bias.MutableGrad().f32()[c] += static_cast<float>(sum_g);
      if (!x.requires_grad()) continue;
      // dh = gy * w; training: dx = rstd * (dh - mean(dh) - h * mean(dh * h)),
      // evaluation (constant statistics): dx = rstd * dh.
      const float w = weight.defined() ? weight.value().f32()[c] : 1.0f;
      const float scale = w * rstd.f32()[c];
      const float mean_g = training ? static_cast<float>(sum_g / m) : 0.0f;
      const float mean_gh = training ? static_cast<float>(sum_gh / m) : 0.0f;
      float* dx = x.MutableGrad().f32();
      for (int64_t n = 0; n < N; ++n) {
        const int64_t off = (n * C + c) * L;
        VectorMap(dx + off, L).array() +=
            scale * (ConstVectorMap(gy.f32() + off, L).array() - mean_g -
                     ConstVectorMap(xhat.f32() + off, L).array() * mean_gh);
      }
    }
  });
}

LayerNorm::LayerNorm(Shape normalized_shape, float eps, bool elementwise_affine)
    : Layer("LayerNorm"), shape_(std::move(normalized_shape)), eps_(eps) {
  config_ok_ = !shape_.empty();
  for (int64_t d : shape_) config_ok_ = config_ok_ && d > 0;
  if (!elementwise_affine) return;
  // A bad config still registers (empty) parameters so the module stays well formed.
  const Shape pshape = config_ok_ ? shape_ : Shape{0};
  weight_ = RegisterDense("weight", pshape, InitSpec::Constant(1.0f));
  bias_ = RegisterDense("bias", pshape, InitSpec::Zeros());
}

std::string LayerNorm::Describe() const {
  return absl::StrCat("LayerNorm(", ShapeToString(shape_), ", eps=", eps_, ")");
}

StatusOr<Variable> LayerNorm::Forward(const Variable& x) {
  if (!config_ok_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": normalized_shape must be non-empty with positive sizes"));
  }
  auto y = LayerNormOp(x, shape_, weight_, bias_, eps_);
  if (!y.ok()) return Annotate(y.status(), Describe());
  return y;
}

BatchNorm::BatchNorm(int64_t num_features, float eps, float momentum, bool affine,
                     bool track_running_stats)
    : Layer("BatchNorm"), c_(num_features), eps_(eps), momentum_(momentum) {
  const int64_t c = c_ > 0 ? c_ : 0;
  if (affine) {
    weight_ = RegisterDense("weight", {c}, InitSpec::Constant(1.0f));
    bias_ = RegisterDense("bias", {c}, InitSpec::Zeros());
  }
  if (track_running_stats) {
    running_mean_ = RegisterBuffer("running_mean", Tensor::Zeros({c}));
    running_var_ = RegisterBuffer("running_var", Tensor::Filled({c}, 1.0f));
  }
}

std::string BatchNorm::Describe() const {
  return absl::StrCat("BatchNorm(", c_, ", eps=", eps_, ", momentum=", momentum_, ")");
}

StatusOr<Variable> BatchNorm::Forward(const Variable& x) {
  if (c_ <= 0) return absl::InvalidArgumentError(Describe() + ": num_features must be positive");
  if (!x.defined() || x.value().rank() < 2 || x.value().dim(1) != c_) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(), ": expects an input (N, ", c_, ", ...), got ",
                                                   x.defined() ? x.value().ShapeString() : "undefined"));
  }
  // Without running statistics the batch statistics serve in every mode (as torch).
  const bool use_batch = training() || !running_mean_.defined();
  auto y = BatchNormOp(x, running_mean_, running_var_, weight_, bias_, use_batch, momentum_, eps_);
  if (!y.ok()) return Annotate(y.status(), Describe());
  return y;
}

}  // namespace pl
