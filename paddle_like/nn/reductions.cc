#include "paddle_like/nn/reductions.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "paddle_like/nn/tensor_checks.h"

namespace pl::functional {
namespace {

using internal::DimSplit;

// The shape after reducing `dim` (normalised) of `shape`.
Shape ReducedShape(const Shape& shape, int dim, bool keepdim) {
  Shape out = shape;
  if (out.empty()) return out;  // rank 0: the result is rank 0 too
  if (keepdim) {
    out[dim] = 1;
  } else {
    out.erase(out.begin() + dim);
  }
  return out;
}

// Checks the input and the dim; fills the normalised dim and the split.
Status Prepare(const Variable& a, int dim, const std::string& op, int* d, DimSplit* split) {
  if (!a.defined()) return absl::InvalidArgumentError(op + ": input is undefined");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(a.value(), op));
  PL_ASSIGN_OR_RETURN(*d, internal::NormalizeDim(dim, a.value(), op));
  *split = internal::SplitAt(a.shape(), *d);
  return absl::OkStatus();
}

// y (outer, inner) = scale * sum_k x (outer, k, inner); backward broadcasts back.
StatusOr<Variable> ScaledSumDim(const Variable& a, int dim, bool keepdim, bool mean) {
  const std::string op = absl::StrCat(mean ? "mean" : "sum", "(dim=", dim, ")");
  int d;
  DimSplit s;
  PL_RETURN_IF_ERROR(Prepare(a, dim, op, &d, &s));
  if (mean && s.n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": dimension ", d, " of ",
                                                   a.value().ShapeString(), " is empty"));
  }
  const float scale = mean ? 1.0f / static_cast<float>(s.n) : 1.0f;
  Tensor y(ReducedShape(a.shape(), d, keepdim), DType::kFloat32);
  const float* x = a.value().f32();
  for (int64_t o = 0; o < s.outer; ++o) {
    VectorMap row(y.f32() + o * s.inner, s.inner);
    if (s.n == 0) {
      row.setZero();
      continue;
    }
    row = ConstMatrixMap(x + o * s.n * s.inner, s.n, s.inner).colwise().sum().transpose() * scale;
  }
  return Variable::FromOp(y, {a}, [a, s, scale](const Tensor& gy) {
    if (!a.requires_grad()) return;
    float* dx = a.MutableGrad().f32();
    for (int64_t o = 0; o < s.outer; ++o) {
      const ConstVectorMap g(gy.f32() + o * s.inner, s.inner);
      MatrixMap(dx + o * s.n * s.inner, s.n, s.inner).rowwise() += g.transpose() * scale;
    }
  });
}

// a > b for the maximum search: a NaN beats any number, the first NaN wins.
template <typename T>
bool Beats(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(b)) return false;
    if (std::isnan(a)) return true;
  }
  return a > b;
}

// For each (outer, inner) the index k of the first maximum of x(outer, k, inner).
template <typename T>
void ArgMaxInto(const T* x, const DimSplit& s, int64_t* out) {
  for (int64_t o = 0; o < s.outer; ++o) {
    const T* base = x + o * s.n * s.inner;
    int64_t* arg = out + o * s.inner;
    std::memset(arg, 0, s.inner * sizeof(int64_t));
    for (int64_t k = 1; k < s.n; ++k) {
      for (int64_t i = 0; i < s.inner; ++i) {
        if (Beats(base[k * s.inner + i], base[arg[i] * s.inner + i])) arg[i] = k;
      }
    }
  }
}

}  // namespace

StatusOr<Variable> SumDim(const Variable& a, int dim, bool keepdim) {
  return ScaledSumDim(a, dim, keepdim, /*mean=*/false);
}

StatusOr<Variable> MeanDim(const Variable& a, int dim, bool keepdim) {
  return ScaledSumDim(a, dim, keepdim, /*mean=*/true);
}

StatusOr<MaxDimResult> MaxDim(const Variable& a, int dim, bool keepdim) {
  const std::string op = absl::StrCat("max(dim=", dim, ")");
  int d;
  DimSplit s;
  PL_RETURN_IF_ERROR(Prepare(a, dim, op, &d, &s));
  if (s.n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": dimension ", d, " of ",
                                                   a.value().ShapeString(), " is empty"));
  }
  const Shape out_shape = ReducedShape(a.shape(), d, keepdim);
  Tensor indices(out_shape, DType::kInt64);
  Tensor y(out_shape, DType::kFloat32);
  const float* x = a.value().f32();
  ArgMaxInto(x, s, indices.i64());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t j = o * s.inner + i;
      y.f32()[j] = x[(o * s.n + indices.i64()[j]) * s.inner + i];
    }
  }
  Variable values = Variable::FromOp(y, {a}, [a, s, indices](const Tensor& gy) {
    if (!a.requires_grad()) return;
    float* dx = a.MutableGrad().f32();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t j = o * s.inner + i;
        dx[(o * s.n + indices.i64()[j]) * s.inner + i] += gy.f32()[j];
      }
    }
  });
  return MaxDimResult{values, indices};
}

StatusOr<Tensor> ArgMax(const Tensor& a, std::optional<int> dim, bool keepdim) {
  const std::string op = dim ? absl::StrCat("argmax(dim=", *dim, ")") : std::string("argmax");
  if (!a.defined() || a.device() != Device::kCPU) {
    return absl::InvalidArgumentError(op + ": expects a CPU tensor");
  }
  DimSplit s;
  Shape out_shape;
  if (dim) {
    PL_ASSIGN_OR_RETURN(int d, internal::NormalizeDim(*dim, a, op));
    s = internal::SplitAt(a.shape(), d);
    out_shape = ReducedShape(a.shape(), d, keepdim);
  } else {
    s.n = a.numel();  // the flattened tensor
    if (keepdim) out_shape.assign(a.rank(), 1);
  }
  if (s.n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the input ", a.ShapeString(),
                                                   " is empty along the reduced dimension"));
  }
  Tensor out(out_shape, DType::kInt64);
  if (a.dtype() == DType::kFloat32) {
    ArgMaxInto(a.f32(), s, out.i64());
  } else {
    ArgMaxInto(a.i64(), s, out.i64());
  }
  return out;
}

StatusOr<Variable> Softmax(const Variable& a, int dim) {
  const std::string op = absl::StrCat("softmax(dim=", dim, ")");
  int d;
  DimSplit s;
  PL_RETURN_IF_ERROR(Prepare(a, dim, op, &d, &s));
  Tensor y(a.shape(), DType::kFloat32);
  const float* x = a.value().f32();
  float* out = y.f32();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.n * s.inner + i;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < s.n; ++k) m = std::max(m, x[base + k * s.inner]);
      if (std::isinf(m) && m < 0) m = 0.0f;  // all -inf: exp gives 0/0 = NaN, as torch
      double total = 0;
      for (int64_t k = 0; k < s.n; ++k) {
        const float e = std::exp(x[base + k * s.inner] - m);
        out[base + k * s.inner] = e;
        total += e;
      }
      const float inv = static_cast<float>(1.0 / total);
      for (int64_t k = 0; k < s.n; ++k) out[base + k * s.inner] *= inv;
    }
  }
  return Variable::FromOp(y, {a}, [a, y, s](const Tensor& gy) {
    if (!a.requires_grad()) return;
    // dx = y * (gy - sum_k gy*y)
    float* dx = a.MutableGrad().f32();
    const float* p = y.f32();
    const float* g = gy.f32();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t base = o * s.n * s.inner + i;
        double dot = 0;
        for (int64_t k = 0; k < s.n; ++k) dot += g[base + k * s.inner] * p[base + k * s.inner];
        for (int64_t k = 0; k < s.n; ++k) {
          const int64_t j = base + k * s.inner;
          dx[j] += p[j] * (g[j] - static_cast<float>(dot));
        }
      }
    }
  });
}

StatusOr<Variable> LogSoftmax(const Variable& a, int dim) {
  const std::string op = absl::StrCat("log_softmax(dim=", dim, ")");
  int d;
  DimSplit s;
  PL_RETURN_IF_ERROR(Prepare(a, dim, op, &d, &s));
  Tensor y(a.shape(), DType::kFloat32);
  const float* x = a.value().f32();
  float* out = y.f32();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.n * s.inner + i;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < s.n; ++k) m = std::max(m, x[base + k * s.inner]);
      if (std::isinf(m) && m < 0) m = 0.0f;
      double total = 0;
      for (int64_t k = 0; k < s.n; ++k) total += std::exp(x[base + k * s.inner] - m);
      // (x - m) - log(total): subtracting m first keeps the precision of large inputs.
      const float log_total = static_cast<float>(std::log(total));
      for (int64_t k = 0; k < s.n; ++k) out[base + k * s.inner] = (x[base + k * s.inner] - m) - log_total;
    }
  }
  return Variable::FromOp(y, {a}, [a, y, s](const Tensor& gy) {
    if (!a.requires_grad()) return;
    // dx = gy - softmax * sum_k gy, softmax = exp(y)
    float* dx = a.MutableGrad().f32();
    const float* ly = y.f32();
    const float* g = gy.f32();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t base = o * s.n * s.inner + i;
        double total = 0;
        for (int64_t k = 0; k < s.n; ++k) total += g[base + k * s.inner];
        for (int64_t k = 0; k < s.n; ++k) {
          const int64_t j = base + k * s.inner;
          dx[j] += g[j] - std::exp(ly[j]) * static_cast<float>(total);
        }
      }
    }
  });
}

}  // namespace pl::functional
