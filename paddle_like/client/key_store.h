// KeyStore: the trainer's side of the keys a ParameterClient moves, in a fixed order:
// each a named dense parameter (value and gradient tensors, which pushes send and pulls
// fill in place) or a sparse table (the rows a step holds, and their gradients). It
// either owns its keys, declared by KeySpec (the key-value API, kv_worker.h), or views
// a Module's parameters without copying them (the Module binding): the pservers see
// the same thing either way, so a model and a key-value worker can share keys by name.
//
// Thread-safety: the set of keys is fixed at construction and may be read from any
// thread; the tensors and tables in it belong to whoever drives the client.
#ifndef PADDLE_LIKE_CLIENT_KEY_STORE_H_
#define PADDLE_LIKE_CLIENT_KEY_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/core/status.h"
#include "paddle_like/nn/module.h"

namespace pl {

struct KeySpec {
  std::string name;
  ParamKind kind = ParamKind::kDense;
  Shape shape;           // dense: the key's shape (its floats travel flat)
  int64_t dim = 0;       // sparse: a row's floats
  int64_t num_rows = 0;  // sparse: ids must lie below it (0: any non-negative id)
  InitSpec init;
  TablePolicy policy;    // sparse: how the pservers keep its rows (admission)

  static KeySpec Dense(std::string name, Shape shape, InitSpec init = InitSpec::Zeros()) {
    return {std::move(name), ParamKind::kDense, std::move(shape), 0, 0, init};
  }
  static KeySpec Sparse(std::string name, int64_t dim, int64_t num_rows = 0, InitSpec init = InitSpec::Zeros(),
                        TablePolicy policy = {}) {
    return {std::move(name), ParamKind::kSparse, {}, dim, num_rows, init, policy};
  }
  // Dense: the key's floats; sparse: a row's.
  int64_t floats() const;
};

class KeyStore {
 public:
  // Keys of their own, created from `specs` (names unique, at least one float each;
  // INVALID_ARGUMENT naming the bad one otherwise).
  static StatusOr<std::unique_ptr<KeyStore>> Declare(const std::vector<KeySpec>& specs);
  // The parameters of `module` (which must outlive the store), as they are now.
  static std::unique_ptr<KeyStore> Of(Module& module);

  const std::vector<NamedParameter>& keys() const { return keys_; }
  // The key named `name`, or NOT_FOUND naming the known ones.
  StatusOr<Parameter*> Find(const std::string& name) const;

 private:
  KeyStore() = default;
  void Add(const std::string& name, Parameter* p);

  std::vector<std::unique_ptr<Parameter>> owned_;  // Declare's
  std::vector<NamedParameter> keys_;
  absl::flat_hash_map<std::string, Parameter*> index_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_KEY_STORE_H_
