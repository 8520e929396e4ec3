#include "cuda/embedding_ops.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

SparseIndex BuildSparseIndex(const int64_t* ids, int64_t n) {
  SparseIndex index;
  index.slots.resize(n);
  absl::flat_hash_map<int64_t, int64_t> slot_of;
  slot_of.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    auto [it, inserted] = slot_of.try_emplace(ids[i], static_cast<int64_t>(index.unique_ids.size()));
    if (inserted) index.unique_ids.push_back(ids[i]);
    index.slots[i] = it->second;
  }
  // Counting sort of positions by slot (stable: ascending positions within a slot).
  const size_t u = index.unique_ids.size();
  index.offsets.assign(u + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++index.offsets[index.slots[i] + 1];
  for (size_t k = 0; k < u; ++k) index.offsets[k + 1] += index.offsets[k];
  index.positions.resize(n);
  std::vector<int64_t> fill(index.offsets.begin(), index.offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i) index.positions[fill[index.slots[i]]++] = i;
  return index;
}

StatusOr<DeviceSparseIndex> UploadSparseIndex(const SparseIndex& index, int device, cudaStream_t stream) {
  DeviceSparseIndex d;
  d.num_unique = static_cast<int64_t>(index.unique_ids.size());
  auto upload = [&](const std::vector<int64_t>& v, Tensor* out) -> Status {
    Tensor host = Tensor::FromIds({static_cast<int64_t>(v.size())}, v);
    PL_ASSIGN_OR_RETURN(*out, AllocateDeviceTensor(host.shape(), DType::kInt64, device));
    return CopyToDevice(host, *out, stream);  // pageable source: staged before return
  };
  PL_RETURN_IF_ERROR(upload(index.slots, &d.slots));
  PL_RETURN_IF_ERROR(upload(index.offsets, &d.offsets));
  PL_RETURN_IF_ERROR(upload(index.positions, &d.positions));
  return d;
}

StatusOr<Tensor> GatherTableRows(SparseTable* table, const SparseIndex& index, int device,
                                 cudaStream_t stream) {
  const int64_t u = static_cast<int64_t>(index.unique_ids.size()), dim = table->dim();
  PL_RETURN_IF_ERROR(table->CheckIds(index.unique_ids.data(), u));
  Tensor host({u, dim}, DType::kFloat32);
  for (int64_t k = 0; k < u; ++k) {
    std::memcpy(host.f32() + k * dim, table->Row(index.unique_ids[k]), dim * sizeof(float));
  }
  PL_ASSIGN_OR_RETURN(Tensor rows, AllocateDeviceTensor({u, dim}, DType::kFloat32, device));
  PL_RETURN_IF_ERROR(CopyToDevice(host, rows, stream));
  return rows;
}

Status EmbeddingGather(const Tensor& rows, const DeviceSparseIndex& index, const Tensor& out,
                       cudaStream_t stream) {
  const char* op = "EmbeddingGather";
  PL_RETURN_IF_ERROR(CheckGpu(rows, DType::kFloat32, op, "rows"));
  if (rows.rank() != 2 || rows.dim(0) != index.num_unique) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": rows must be (", index.num_unique, ", D), got ",
                                                   rows.ShapeString()));
  }
  PL_RETURN_IF_ERROR(CheckGpu(index.slots, DType::kInt64, op, "index.slots"));
  const int64_t n = index.slots.numel(), dim = rows.dim(1);
  PL_RETURN_IF_ERROR(CheckGpu(out, DType::kFloat32, {n, dim}, op, "out"));
  return FromCuda(kernels::EmbeddingGather(rows.f32(), index.slots.i64(), out.f32(), n, dim, stream), op);
}

Status EmbeddingGradient(const Tensor& gy, const DeviceSparseIndex& index, const Tensor& grad_rows,
                         bool accumulate, cudaStream_t stream) {
  const char* op = "EmbeddingGradient";
  PL_RETURN_IF_ERROR(CheckGpu(index.positions, DType::kInt64, op, "index.positions"));
  PL_RETURN_IF_ERROR(CheckGpu(index.offsets, DType::kInt64, {index.num_unique + 1}, op, "index.offsets"));
  const int64_t n = index.positions.numel();
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, op, "gy"));
  if (gy.rank() != 2 || gy.dim(0) != n) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": gy must be (", n, ", D), got ", gy.ShapeString()));
  }
  const int64_t dim = gy.dim(1);
  PL_RETURN_IF_ERROR(CheckGpu(grad_rows, DType::kFloat32, {index.num_unique, dim}, op, "grad_rows"));
  return FromCuda(kernels::EmbeddingSegmentSum(gy.f32(), index.positions.i64(), index.offsets.i64(),
                                               grad_rows.f32(), index.num_unique, dim, accumulate, stream),
                  op);
}

Status AccumulateTableGradient(const Tensor& grad_rows, const SparseIndex& index, SparseTable* table,
                               cudaStream_t stream) {
  const int64_t u = static_cast<int64_t>(index.unique_ids.size());
  PL_RETURN_IF_ERROR(CheckGpu(grad_rows, DType::kFloat32, {u, table->dim()}, "AccumulateTableGradient",
                              "grad_rows"));
  PL_ASSIGN_OR_RETURN(Tensor host, ToHost(grad_rows, stream));
  for (int64_t k = 0; k < u; ++k) table->AccumulateGrad(index.unique_ids[k], host.f32() + k * table->dim());
  return absl::OkStatus();
}

}  // namespace pl::cuda
