#include "paddle_like/nn/sparse_table.h"

#include <algorithm>
#include <cstring>

namespace pl {

float* SparseRows::Find(int64_t id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : values_.data() + it->second * dim_;
}

const float* SparseRows::Find(int64_t id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : values_.data() + it->second * dim_;
}

float* SparseRows::FindOrInsert(int64_t id, bool* created) {
  auto [it, inserted] = index_.try_emplace(id, ids_.size());
  if (created) *created = inserted;
  if (inserted) {
    ids_.push_back(id);
    values_.resize(values_.size() + dim_, 0.0f);
  }
  return values_.data() + it->second * dim_;
}

void SparseRows::Clear() {
  ids_.clear();
  values_.clear();
  index_.clear();
}

void SparseRows::Reserve(size_t rows) {
  ids_.reserve(rows);
  values_.reserve(rows * dim_);
  index_.reserve(rows);
}

SparseTable::SparseTable(std::string name, int64_t dim, int64_t num_rows, InitSpec init)
    : name_(std::move(name)), dim_(dim), num_rows_(num_rows), init_(init), rows_(dim), grad_(dim) {}

void SparseTable::Reset(uint64_t seed) {
  seed_ = seed;
  rows_.Clear();
  grad_.Clear();
}

Status SparseTable::CheckIds(const int64_t* ids, int64_t n) const {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || (num_rows_ > 0 && ids[i] >= num_rows_)) {
      return absl::OutOfRangeError(absl::StrCat("sparse table '", name_, "': id ", ids[i],
                                                " at position ", i, " is outside [0, ",
                                                num_rows_ > 0 ? num_rows_ : INT64_MAX, ")"));
    }
  }
  return absl::OkStatus();
}

float* SparseTable::Row(int64_t id) {
  bool created = false;
  float* row = rows_.FindOrInsert(id, &created);
  if (created) InitializeValues(init_, RowStreamSeed(seed_, name_, id), row, dim_);
  return row;
}

void SparseTable::SetRow(int64_t id, const float* values) {
  std::memcpy(rows_.FindOrInsert(id), values, dim_ * sizeof(float));
}

void SparseTable::AccumulateGrad(int64_t id, const float* g) {
  float* row = grad_.FindOrInsert(id);
  for (int64_t j = 0; j < dim_; ++j) row[j] += g[j];
}

}  // namespace pl
