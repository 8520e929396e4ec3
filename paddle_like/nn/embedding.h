// Embedding: looks up rows of a sparse table by id.
//   ids: int64 (B, F) or (B)   table: num_rows x dim   y: float32 (B, F, dim) or (B, dim)
// Parameter "table" is sparse: rows are created on first touch (deterministically,
// from the seed, the table's full name and the id), and backward adds each output
// row's gradient into table->grad() for the touched ids only; no dense
// (num_rows, dim) gradient is ever formed. The ids need no gradient; the output
// requires one because the table is trainable.
//
// Thread-safety: see Module; forward and backward mutate the table (rows, grad).
#ifndef PADDLE_LIKE_NN_EMBEDDING_H_
#define PADDLE_LIKE_NN_EMBEDDING_H_

#include <memory>
#include <string>

#include "paddle_like/nn/module.h"

namespace pl {

class Embedding : public Layer {
 public:
  // `num_rows` bounds the ids ([0, num_rows)); 0 allows any non-negative id (hashed
  // feature spaces whose rows live on parameter servers).
  Embedding(int64_t num_rows, int64_t dim, InitSpec init = InitSpec::Normal(0.01f));
  StatusOr<Variable> Forward(const Variable& ids) override;

  int64_t num_rows() const { return num_rows_; }
  int64_t dim() const { return dim_; }
  const std::shared_ptr<SparseTable>& table() const { return table_; }
  // "Embedding(num_rows=1000, dim=8)", used in errors.
  std::string Describe() const;

 private:
  int64_t num_rows_, dim_;
  std::shared_ptr<SparseTable> table_;
};

// torch.nn.functional.embedding over a dense weight:
//   ids: int64, any shape, each in [0, num)   weight: float32 (num, dim)
//   y: ids.shape + (dim)
// Backward adds each output row's gradient into a dense (num, dim) weight gradient.
StatusOr<Variable> EmbeddingOp(const Tensor& ids, const Variable& weight);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_EMBEDDING_H_
