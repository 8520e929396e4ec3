// Embedding lookup and its sparse gradient on the GPU. A batch touches U distinct
// rows of a (possibly huge, possibly remote) table; only those rows go to the device,
// packed as rows (U, D), and the gradient comes back as one accumulated row per
// distinct id — the sparse gradient of paddle_like/nn/embedding.h, never a dense
// (num_rows, D) matrix.
//
//   ids: int64 (N) (any shape, flattened)   rows: (U, D)   out: (N, D)   grad_rows: (U, D)
//
// The index (distinct ids, the slot of each lookup, and the lookups grouped by slot
// for a deterministic segmented sum) is built on the host, where the ids are.
// Thread-safety: stateless; calls on one stream run in order.
#ifndef PADDLE_LIKE_CUDA_EMBEDDING_OPS_H_
#define PADDLE_LIKE_CUDA_EMBEDDING_OPS_H_

#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"
#include "paddle_like/nn/sparse_table.h"

namespace pl::cuda {

struct SparseIndex {
  std::vector<int64_t> unique_ids;  // (U) in order of first appearance
  std::vector<int64_t> slots;       // (N) unique_ids[slots[i]] == ids[i]
  std::vector<int64_t> offsets;     // (U + 1) positions of slot u: [offsets[u], offsets[u+1])
  std::vector<int64_t> positions;   // (N) lookup positions grouped by slot, ascending within
};
SparseIndex BuildSparseIndex(const int64_t* ids, int64_t n);

// The index's arrays on a device.
struct DeviceSparseIndex {
  int64_t num_unique = 0;
  Tensor slots;      // int64 (N)
  Tensor offsets;    // int64 (U + 1)
  Tensor positions;  // int64 (N)
};
StatusOr<DeviceSparseIndex> UploadSparseIndex(const SparseIndex& index, int device, cudaStream_t stream);

// rows (U, D) on `device` holding table rows of index.unique_ids (created on first
// touch, as SparseTable::Row does); checks the ids against the table's bound.
StatusOr<Tensor> GatherTableRows(SparseTable* table, const SparseIndex& index, int device,
                                 cudaStream_t stream);

// out (N, D) = rows[slots].
Status EmbeddingGather(const Tensor& rows, const DeviceSparseIndex& index, const Tensor& out,
                       cudaStream_t stream);
// grad_rows (U, D) (+)= per distinct id, the sum of gy (N, D) over its lookups.
Status EmbeddingGradient(const Tensor& gy, const DeviceSparseIndex& index, const Tensor& grad_rows,
                         bool accumulate, cudaStream_t stream);
// Copies grad_rows (U, D) to the host and adds row u into table->grad() for
// index.unique_ids[u] (waits for the copy).
Status AccumulateTableGradient(const Tensor& grad_rows, const SparseIndex& index, SparseTable* table,
                               cudaStream_t stream);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_EMBEDDING_OPS_H_
