#include "paddle_like/nn/embedding.h"

#include <cstring>

#include "paddle_like/core/grad_mode.h"

namespace pl {

Embedding::Embedding(int64_t num_rows, int64_t dim, InitSpec init)
    : Layer("Embedding"), num_rows_(num_rows), dim_(dim) {
  table_ = RegisterSparse("table", dim_ > 0 ? dim_ : 0, num_rows_ > 0 ? num_rows_ : 0, init);
}

std::string Embedding::Describe() const {
  return absl::StrCat("Embedding(num_rows=", num_rows_, ", dim=", dim_, ")");
}

StatusOr<Variable> Embedding::Forward(const Variable& ids) {
  if (dim_ <= 0 || num_rows_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": dim must be positive and num_rows non-negative"));
  }
  const Tensor& iv = ids.value();
  if (!iv.defined() || iv.dtype() != DType::kInt64 || iv.device() != Device::kCPU ||
      iv.rank() < 1 || iv.rank() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        Describe(), ": expects int64 CPU ids of shape [B] or [B, F], got ",
        iv.defined() ? DTypeName(iv.dtype()) : "undefined", " ", iv.ShapeString()));
  }
  const int64_t n = iv.numel();
  const int64_t* id = iv.i64();
  Status ok = table_->CheckIds(id, n);
  if (!ok.ok()) return Annotate(ok, absl::StrCat(Describe(), " with ids ", iv.ShapeString()));

  Shape out_shape = iv.shape();
  out_shape.push_back(dim_);
  Tensor y(out_shape, DType::kFloat32);
  // Serial: Row() may insert into the table, and each pointer it returns is only
  // valid until the next insertion, so copy the row out at once.
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(y.f32() + i * dim_, table_->Row(id[i]), dim_ * sizeof(float));
  }

  // The output needs a gradient whenever the table is trained, although its only
  // input (the ids) does not, so it is built by hand rather than with FromOp; like
  // FromOp it records nothing while grad is off on this thread (grad_mode.h).
  if (!GradEnabled()) return Variable(y, /*requires_grad=*/false);
  Variable out(y, /*requires_grad=*/true);
  std::shared_ptr<SparseTable> table = table_;
  const Tensor ids_value = iv.Clone();  // the caller may reuse its id buffer before backward
  const int64_t dim = dim_;
  out.node()->inputs = {ids};
  out.node()->backward = [table, ids_value, dim](const Tensor& gy) {
    const int64_t* id = ids_value.i64();
    for (int64_t i = 0; i < ids_value.numel(); ++i) table->AccumulateGrad(id[i], gy.f32() + i * dim);
  };
  return out;
}

StatusOr<Variable> EmbeddingOp(const Tensor& ids, const Variable& weight) {
  const Tensor& wv = weight.value();
  if (!weight.defined() || wv.dtype() != DType::kFloat32 || wv.device() != Device::kCPU || wv.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding: expects a float32 CPU weight (num, dim), got ",
        weight.defined() ? absl::StrCat(DTypeName(wv.dtype()), " ", wv.ShapeString()) : "undefined"));
  }
  if (!ids.defined() || ids.dtype() != DType::kInt64 || ids.device() != Device::kCPU) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding: expects int64 CPU ids, got ",
        ids.defined() ? absl::StrCat(DTypeName(ids.dtype()), " ", ids.ShapeString()) : "undefined"));
  }
  const int64_t num = wv.dim(0), dim = wv.dim(1), n = ids.numel();
  const Tensor id = ids.Clone();  // the caller may reuse its id buffer before backward
  for (int64_t i = 0; i < n; ++i) {
    if (id.i64()[i] < 0 || id.i64()[i] >= num) {
      return absl::InvalidArgumentError(absl::StrCat("embedding: id ", id.i64()[i], " at index ", i,
                                                     " is outside [0, ", num, ") for weight ",
                                                     wv.ShapeString()));
    }
  }
  Shape out_shape = ids.shape();
  out_shape.push_back(dim);
  Tensor y(out_shape, DType::kFloat32);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(y.f32() + i * dim, wv.f32() + id.i64()[i] * dim, dim * sizeof(float));
  }
  return Variable::FromOp(y, {weight}, [weight, id, n, dim](const Tensor& gy) {
    if (!weight.requires_grad()) return;
    float* dw = weight.MutableGrad().f32();
    for (int64_t i = 0; i < n; ++i) {
      VectorMap(dw + id.i64()[i] * dim, dim) += ConstVectorMap(gy.f32() + i * dim, dim);
    }
  });
}

}  // namespace pl
