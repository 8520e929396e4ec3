#include "paddle_like/nn/losses.h"

#include <cmath>

namespace pl {

StatusOr<Variable> SoftmaxCrossEntropy(const Variable& logits, const Tensor& labels) {
  const Tensor& z = logits.value();
  if (!z.defined() || z.dtype() != DType::kFloat32 || z.device() != Device::kCPU ||
      z.rank() != 2 || z.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SoftmaxCrossEntropy: expects float32 CPU logits of shape [B, K], got ",
        z.defined() ? DTypeName(z.dtype()) : "undefined", " ", z.ShapeString()));
  }
  const int64_t B = z.dim(0), K = z.dim(1);
  if (!labels.defined() || labels.dtype() != DType::kInt64 || labels.rank() != 1 ||
      labels.dim(0) != B) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SoftmaxCrossEntropy: expects int64 labels of shape [", B, "] for logits ",
        z.ShapeString(), ", got ", labels.defined() ? DTypeName(labels.dtype()) : "undefined",
        " ", labels.ShapeString()));
  }
  if (B == 0) {
    return absl::InvalidArgumentError("SoftmaxCrossEntropy: empty batch " + z.ShapeString());
  }
  const int64_t* y = labels.i64();
  for (int64_t b = 0; b < B; ++b) {
    if (y[b] < 0 || y[b] >= K) {
      return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: label ", y[b],
                                                     " at index ", b, " is outside [0, ", K,
                                                     ") for logits ", z.ShapeString()));
    }
  }
  Tensor prob = Softmax(z);  // (B, K), kept for backward
  double total = 0;
  const auto zm = z.matrix();
  for (int64_t b = 0; b < B; ++b) {
    const float m = zm.row(b).maxCoeff();
    const double lse = m + std::log(static_cast<double>((zm.row(b).array() - m).exp().sum()));
    total += lse - zm(b, y[b]);
  }
  Tensor loss = Tensor::Filled({}, static_cast<float>(total / B));
  // The caller may refill its label buffer before backward runs: keep a copy.
  return Variable::FromOp(loss, {logits}, [logits, prob, labels = labels.Clone(), B](const Tensor& g) {
    if (!logits.requires_grad()) return;
    // d/dz = (softmax(z) - onehot(label)) * g / B
    const float scale = g.f32()[0] / static_cast<float>(B);
    auto dz = logits.MutableGrad().matrix();
    dz += prob.matrix() * scale;
    for (int64_t b = 0; b < B; ++b) dz(b, labels.i64()[b]) -= scale;
  });
}

StatusOr<Variable> SigmoidBinaryCrossEntropy(const Variable& logits, const Tensor& labels) {
  const Tensor& z = logits.value();
  const bool shape_ok = z.defined() && (z.rank() == 1 || (z.rank() == 2 && z.dim(1) == 1));
  if (!shape_ok || z.dtype() != DType::kFloat32 || z.device() != Device::kCPU) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SigmoidBinaryCrossEntropy: expects float32 CPU logits of shape [B] or [B, 1], got ",
        z.defined() ? DTypeName(z.dtype()) : "undefined", " ", z.ShapeString()));
  }
  const int64_t B = z.dim(0);
  if (!labels.defined() || labels.dtype() != DType::kFloat32 || labels.numel() != B ||
      labels.rank() < 1 || labels.dim(0) != B) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SigmoidBinaryCrossEntropy: expects float32 labels of shape [", B, "] for logits ",
        z.ShapeString(), ", got ", labels.defined() ? DTypeName(labels.dtype()) : "undefined",
        " ", labels.ShapeString()));
  }
  if (B == 0) {
    return absl::InvalidArgumentError("SigmoidBinaryCrossEntropy: empty batch " + z.ShapeString());
  }
  const float* t = labels.f32();
  for (int64_t b = 0; b < B; ++b) {
    if (!(t[b] >= 0.0f && t[b] <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("SigmoidBinaryCrossEntropy: label ", t[b],
                                                     " at index ", b, " is outside [0, 1]"));
    }
  }
  const float* zp = z.f32();
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    const double v = zp[b];
    total += std::max(v, 0.0) - v * t[b] + std::log1p(std::exp(-std::abs(v)));
  }
  Tensor loss = Tensor::Filled({}, static_cast<float>(total / B));
  return Variable::FromOp(loss, {logits}, [logits, labels = labels.Clone(), B](const Tensor& g) {
    if (!logits.requires_grad()) return;
    // d/dz = (sigmoid(z) - t) * g / B
    const float scale = g.f32()[0] / static_cast<float>(B);
    const Tensor p = SigmoidOf(logits.value());
    logits.MutableGrad().flat().array() +=
        (p.flat().array() - ConstVectorMap(labels.f32(), B).array()) * scale;
  });
}

StatusOr<Reduction> ParseReduction(const std::string& name) {
  if (name == "mean") return Reduction::kMean;
  if (name == "sum") return Reduction::kSum;
  if (name == "none") return Reduction::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("reduction must be 'mean', 'sum' or 'none', got '", name, "'"));
}

namespace {

// The element-wise losses: l = f(pred - target) with f' given, then reduced.
template <typename F, typename DF>
StatusOr<Variable> PointwiseLoss(const Variable& pred, const Variable& target, Reduction reduction,
                                 const char* op, F f, DF df) {
  for (const Variable* v : {&pred, &target}) {
    if (!v->defined() || v->value().dtype() != DType::kFloat32 || v->value().device() != Device::kCPU) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": expects float32 CPU input and target"));
    }
  }
  if (pred.shape() != target.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input ", pred.value().ShapeString(),
                                                   " and target ", target.value().ShapeString(),
                                                   " differ in shape (no broadcasting)"));
  }
  const int64_t n = pred.value().numel();
  if (n == 0 && reduction == Reduction::kMean) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": mean of an empty input ", pred.value().ShapeString()));
  }
  Tensor diff(pred.shape(), DType::kFloat32);
  diff.flat() = pred.value().flat() - target.value().flat();
  Tensor y;
  if (reduction == Reduction::kNone) {
    y = Tensor(pred.shape(), DType::kFloat32);
    for (int64_t i = 0; i < n; ++i) y.f32()[i] = f(diff.f32()[i]);
  } else {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += f(diff.f32()[i]);
    y = Tensor::Filled({}, static_cast<float>(reduction == Reduction::kMean ? total / n : total));
  }
  return Variable::FromOp(y, {pred, target}, [pred, target, diff, reduction, n, df](const Tensor& gy) {
    Tensor d(diff.shape(), DType::kFloat32);  // dl/dpred
    const float scale = reduction == Reduction::kMean ? 1.0f / static_cast<float>(n) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float g = reduction == Reduction::kNone ? gy.f32()[i] : gy.f32()[0] * scale;
      d.f32()[i] = g * df(diff.f32()[i]);
    }
    if (pred.requires_grad()) pred.MutableGrad().flat() += d.flat();
    if (target.requires_grad()) target.MutableGrad().flat() -= d.flat();
  });
}

}  // namespace

StatusOr<Variable> MSELoss(const Variable& pred, const Variable& target, Reduction reduction) {
  return PointwiseLoss(
      pred, target, reduction, "mse_loss", [](float d) { return d * d; },
      [](float d) { return 2.0f * d; });
}

StatusOr<Variable> L1Loss(const Variable& pred, const Variable& target, Reduction reduction) {
  return PointwiseLoss(
      pred, target, reduction, "l1_loss", [](float d) { return std::abs(d); },
      [](float d) { return static_cast<float>((d > 0) - (d < 0)); });
}

StatusOr<Variable> NLLLoss(const Variable& log_probs, const Tensor& target, Reduction reduction,
                           int64_t ignore_index) {
  const Tensor& z = log_probs.value();
  if (!log_probs.defined() || z.dtype() != DType::kFloat32 || z.device() != Device::kCPU ||
      z.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nll_loss: expects float32 CPU log-probabilities of shape [B, C], got ",
        log_probs.defined() ? absl::StrCat(DTypeName(z.dtype()), " ", z.ShapeString()) : "undefined"));
  }
  const int64_t B = z.dim(0), C = z.dim(1);
  if (!target.defined() || target.dtype() != DType::kInt64 || target.rank() != 1 ||
      target.dim(0) != B) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nll_loss: expects int64 targets of shape [", B, "] for input ", z.ShapeString(), ", got ",
        target.defined() ? absl::StrCat(DTypeName(target.dtype()), " ", target.ShapeString()) : "undefined"));
  }
  const Tensor t = target.Clone();  // the caller may refill its buffer before backward
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t k = t.i64()[b];
    if (k == ignore_index) continue;
    if (k < 0 || k >= C) {
      return absl::InvalidArgumentError(absl::StrCat("nll_loss: target ", k, " at index ", b,
                                                     " is outside [0, ", C, ") for input ",
                                                     z.ShapeString()));
    }
    ++counted;
  }
  Tensor y = reduction == Reduction::kNone ? Tensor({B}, DType::kFloat32) : Tensor::Filled({}, 0.0f);
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t k = t.i64()[b];
    const float l = k == ignore_index ? 0.0f : -z.f32()[b * C + k];
    if (reduction == Reduction::kNone) y.f32()[b] = l;
    total += l;
  }
  // torch: the mean over zero counted rows is 0/0 = NaN.
  if (reduction == Reduction::kMean) y.f32()[0] = static_cast<float>(total / counted);
  if (reduction == Reduction::kSum) y.f32()[0] = static_cast<float>(total);
  return Variable::FromOp(y, {log_probs}, [log_probs, t, reduction, ignore_index, counted, B, C](const Tensor& gy) {
    if (!log_probs.requires_grad()) return;
    float* dz = log_probs.MutableGrad().f32();
    const float scale = reduction == Reduction::kMean ? 1.0f / static_cast<float>(counted) : 1.0f;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t k = t.i64()[b];
      if (k == ignore_index) continue;
      dz[b * C + k] -= (reduction == Reduction::kNone ? gy.f32()[b] : gy.f32()[0]) * scale;
    }
  });
}

Tensor Softmax(const Tensor& logits) {
  const int64_t rows = logits.rank() <= 1 ? 1 : logits.dim(0);
  const int64_t cols = rows == 0 ? 0 : logits.numel() / rows;
  Tensor p(logits.shape(), DType::kFloat32);
  const ConstMatrixMap z(logits.f32(), rows, cols);
  MatrixMap out(p.f32(), rows, cols);
  if (cols == 0) return p;
  for (int64_t b = 0; b < rows; ++b) {
    const float m = z.row(b).maxCoeff();
    out.row(b) = (z.row(b).array() - m).exp();
    out.row(b) /= out.row(b).sum();
  }
  return p;
}

Tensor SigmoidOf(const Tensor& logits) {
  Tensor p(logits.shape(), DType::kFloat32);
  p.flat().array() = internal::StableSigmoid(logits.flat().array());
  return p;
}

int64_t CountCorrect(const Tensor& logits, const Tensor& labels) {
  if (!logits.defined() || !labels.defined() || logits.dtype() != DType::kFloat32 ||
      logits.rank() < 1 || logits.rank() > 2) {
    return -1;
  }
  const int64_t B = logits.dim(0);
  const int64_t K = logits.rank() == 2 ? logits.dim(1) : 1;
  if (labels.numel() != B) return -1;
  int64_t correct = 0;
  if (K > 1) {
    if (labels.dtype() != DType::kInt64) return -1;
    const ConstMatrixMap z(logits.f32(), B, K);
    for (int64_t b = 0; b < B; ++b) {
      Eigen::Index arg;
      z.row(b).maxCoeff(&arg);
      correct += arg == labels.i64()[b];
    }
    return correct;
  }
  for (int64_t b = 0; b < B; ++b) {
    const bool label = labels.dtype() == DType::kInt64 ? labels.i64()[b] != 0
                                                        : labels.f32()[b] > 0.5f;
    correct += (logits.f32()[b] > 0.0f) == label;
  }
  return correct;
}

}  // namespace pl
