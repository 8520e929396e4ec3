// SparseTable: the rows of an embedding table that one process holds, keyed by row
// id, created on first touch with the table's deterministic initialiser. A
// single-process run holds every row it has touched; a distributed trainer holds
// only the rows pulled for the current batch. Its gradient is sparse: the ids a
// batch touched and one accumulated row per id, nothing for the untouched rows.
//
// Thread-safety: not thread-safe; one trainer step uses a table at a time.
#ifndef PADDLE_LIKE_NN_SPARSE_TABLE_H_
#define PADDLE_LIKE_NN_SPARSE_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/core/status.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/optim/optimizer_spec.h"

namespace pl {

// Rows keyed by id: ids()[i] owns values [i*dim, (i+1)*dim).
class SparseRows {
 public:
  explicit SparseRows(int64_t dim = 0) : dim_(dim) {}
  int64_t dim() const { return dim_; }
  size_t size() const { return ids_.size(); }
  const std::vector<int64_t>& ids() const { return ids_; }
  const std::vector<float>& values() const { return values_; }
  std::vector<float>& mutable_values() { return values_; }
  bool Contains(int64_t id) const { return index_.contains(id); }
  // Row for `id`, or nullptr. Pointers are invalidated by the next insertion.
  float* Find(int64_t id);
  const float* Find(int64_t id) const;
  // Row for `id`; a new row is zero-filled and `*created` (if given) set to true.
  float* FindOrInsert(int64_t id, bool* created = nullptr);
  void Clear();
  void Reserve(size_t rows);

 private:
  int64_t dim_;
  std::vector<int64_t> ids_;
  std::vector<float> values_;
  absl::flat_hash_map<int64_t, size_t> index_;
};

// How the parameter servers keep a table's rows (one process keeps every row it sees).
struct TablePolicy {
  // An id gets its own row at its admit_after-th pushed update; until then it reads
  // zeros and its gradients change nothing (0 or 1: a row at once). At most 65535.
  int64_t admit_after = 0;
  // A row neither pulled nor pushed for this many seconds is evicted; touched again, it
  // starts over from the initializer (and admission). 0: kept until the memory cap
  // (pl-pserver --sparse_memory_mb) needs its room. At most a year.
  int64_t evict_after_s = 0;
  // The table's own optimizer, for its rows on the pservers and in one process (unset:
  // the job's). Embeddings often want another rule or rate than the dense layers
  // (Adagrad for the rows, Adam for the MLP). The job's learning-rate schedule does not
  // reach it.
  std::optional<OptimizerSpec> optimizer;
};

class SparseTable {
 public:
  // `num_rows` bounds the ids (0 means any non-negative int64 id is valid).
  SparseTable(std::string name, int64_t dim, int64_t num_rows, InitSpec init);

  const TablePolicy& policy() const { return policy_; }
  void set_policy(const TablePolicy& policy) { policy_ = policy; }

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  int64_t dim() const { return dim_; }
  int64_t num_rows() const { return num_rows_; }
  const InitSpec& init() const { return init_; }
  uint64_t seed() const { return seed_; }
  // Changes the seed of rows created from now on, and drops the rows held.
  void Reset(uint64_t seed);

  // Checks that every id is within [0, num_rows).
  Status CheckIds(const int64_t* ids, int64_t n) const;
  // The row for `id`, created with the initialiser when absent.
  float* Row(int64_t id);
  // Installs values for `id` (e.g. pulled from a parameter server).
  void SetRow(int64_t id, const float* values);

  SparseRows& rows() { return rows_; }
  const SparseRows& rows() const { return rows_; }
  SparseRows& grad() { return grad_; }
  const SparseRows& grad() const { return grad_; }
  // Adds `g` (dim floats) into the gradient row of `id`.
  void AccumulateGrad(int64_t id, const float* g);
  void ZeroGrad() { grad_.Clear(); }

 private:
  std::string name_;
  int64_t dim_;
  int64_t num_rows_;
  InitSpec init_;
  TablePolicy policy_;
  uint64_t seed_ = 0;
  SparseRows rows_;
  SparseRows grad_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_NN_SPARSE_TABLE_H_
