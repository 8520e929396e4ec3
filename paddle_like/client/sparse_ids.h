// SparseIds: the keys of a sparse pull, the row ids per sparse table (by parameter name)
// that a batch needs. A model says which (ExampleModel::SparseInputs); the pserver client
// pulls exactly those rows (param_client.h).
#ifndef PADDLE_LIKE_CLIENT_SPARSE_IDS_H_
#define PADDLE_LIKE_CLIENT_SPARSE_IDS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pl {

using SparseIds = std::vector<std::pair<std::string, std::vector<int64_t>>>;

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_SPARSE_IDS_H_
