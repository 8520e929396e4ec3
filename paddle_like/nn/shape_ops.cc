#include "paddle_like/nn/shape_ops.h"

#include <cstring>

#include "absl/strings/str_join.h"
#include "paddle_like/nn/tensor_checks.h"

namespace pl {
namespace {

// A view of x with `shape`; backward adds gy (viewed flat) into x's gradient.
Variable ViewAs(const Variable& x, const Tensor& view) {
  return Variable::FromOp(view, {x}, [x](const Tensor& gy) {
    if (x.requires_grad()) x.MutableGrad().flat() += gy.flat();
  });
}

// Copies src (A, D0, B, D1, C) to dst (A, D1, B, D0, C), or adds it in when `add`.
template <typename T>
void SwapCopy(const T* src, T* dst, const int64_t (&dims)[5], bool add) {
  const auto [A, D0, B, D1, C] = dims;
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t j = 0; j < D1; ++j) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t i = 0; i < D0; ++i) {
          const T* from = src + (((a * D0 + i) * B + b) * D1 + j) * C;
          T* to = dst + (((a * D1 + j) * B + b) * D0 + i) * C;
          if (add) {
            for (int64_t c = 0; c < C; ++c) to[c] += from[c];
          } else {
            std::memcpy(to, from, C * sizeof(T));
          }
        }
      }
    }
  }
}

}  // namespace

StatusOr<Variable> Transpose(const Variable& x, int dim0, int dim1) {
  const std::string op = absl::StrCat("transpose(", dim0, ", ", dim1, ")");
  if (!x.defined() || !x.value().defined() || x.value().device() != Device::kCPU) {
    return absl::InvalidArgumentError(op + ": expects a CPU tensor");
  }
  const Tensor& xv = x.value();
  PL_ASSIGN_OR_RETURN(int d0, internal::NormalizeDim(dim0, xv, op));
  PL_ASSIGN_OR_RETURN(int d1, internal::NormalizeDim(dim1, xv, op));
  if (d0 == d1 || xv.rank() < 2) return x;  // nothing moves: the same Variable, as a view
  if (d0 > d1) std::swap(d0, d1);
  const Shape& s = xv.shape();
  int64_t dims[5] = {1, s[d0], 1, s[d1], 1};
  for (int i = 0; i < xv.rank(); ++i) {
    if (i < d0) dims[0] *= s[i];
    if (i > d0 && i < d1) dims[2] *= s[i];
    if (i > d1) dims[4] *= s[i];
  }
  Shape out_shape = s;
  std::swap(out_shape[d0], out_shape[d1]);
  Tensor y(out_shape, xv.dtype());
  if (xv.dtype() == DType::kFloat32) {
    SwapCopy(xv.f32(), y.f32(), dims, false);
  } else {
    SwapCopy(xv.i64(), y.i64(), dims, false);
  }
  if (xv.dtype() != DType::kFloat32) return Variable(y, false);
  return Variable::FromOp(y, {x}, [x, dims](const Tensor& gy) {
    if (!x.requires_grad()) return;
    // gy is (A, D1, B, D0, C): swapping back is the same copy with D0 and D1 exchanged.
    const int64_t back[5] = {dims[0], dims[3], dims[2], dims[1], dims[4]};
    SwapCopy(gy.f32(), x.MutableGrad().f32(), back, true);
  });
}

StatusOr<Variable> Flatten::Forward(const Variable& x) {
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), "Flatten"));
  const Tensor& xv = x.value();
  if (xv.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Flatten: expects an input with a batch dimension, got ", xv.ShapeString()));
  }
  const int64_t n = xv.dim(0);
  PL_ASSIGN_OR_RETURN(Tensor view, xv.Reshape({n, n == 0 ? 0 : xv.numel() / n}));
  return ViewAs(x, view);
}

StatusOr<Variable> Reshape::Forward(const Variable& x) {
  const std::string op = absl::StrCat("Reshape(", ShapeToString(shape_), ")");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  const Tensor& xv = x.value();
  if (xv.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expects an input with a batch dimension, got ", xv.ShapeString()));
  }
  Shape target{xv.dim(0)};
  target.insert(target.end(), shape_.begin(), shape_.end());
  auto view = xv.Reshape(target);
  if (!view.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": cannot view input ", xv.ShapeString(),
                                                   " as ", ShapeToString(target)));
  }
  return ViewAs(x, *view);
}

StatusOr<Variable> Concat(const std::vector<Variable>& xs, int axis) {
  if (xs.empty()) return absl::InvalidArgumentError("Concat: no inputs");
  const std::string op = absl::StrCat("Concat(axis=", axis, ")");
  for (size_t i = 0; i < xs.size(); ++i) {
    PL_RETURN_IF_ERROR(
        internal::CheckFloatCpu(xs[i].value(), absl::StrCat(op, " input ", i)));
  }
  const Shape& first = xs[0].shape();
  const int rank = static_cast<int>(first.size());
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": axis out of range for input 0 of shape ", ShapeToString(first)));
  }
  auto shapes_list = [&] {
    std::vector<std::string> s;
    for (const Variable& v : xs) s.push_back(v.value().ShapeString());
    return absl::StrJoin(s, ", ");
  };
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    bool match = s.size() == first.size();
    for (int d = 0; match && d < rank; ++d) match = d == ax || s[d] == first[d];
    if (!match) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": input ", i, " has shape ", ShapeToString(s), " but input 0 has shape ",
          ShapeToString(first), "; all dimensions except ", ax, " must match (inputs: ",
          shapes_list(), ")"));
    }
    total += s[ax];
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; ++d) outer *= first[d];
  for (int d = ax + 1; d < rank; ++d) inner *= first[d];

  Shape out_shape = first;
  out_shape[ax] = total;
  Tensor y(out_shape, DType::kFloat32);
  const int64_t out_row = total * inner;  // floats per outer index in y
  std::vector<int64_t> offsets;           // each input's column offset in a y row
  int64_t off = 0;
  for (const Variable& v : xs) {
    offsets.push_back(off);
    const int64_t row = v.shape()[ax] * inner;
    const float* src = v.value().f32();
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(y.f32() + o * out_row + off, src + o * row, row * sizeof(float));
    }
    off += row;
  }
  return Variable::FromOp(y, xs, [xs, offsets, outer, out_row, inner, ax](const Tensor& gy) {
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].requires_grad()) continue;
      const int64_t row = xs[i].shape()[ax] * inner;
      MatrixMap(xs[i].MutableGrad().f32(), outer, row) +=
          Eigen::Map<const RowMatrix<float>, 0, Eigen::OuterStride<>>(
              gy.f32() + offsets[i], outer, row, Eigen::OuterStride<>(out_row));
    }
  });
}

}  // namespace pl
