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

}  // namespace

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
