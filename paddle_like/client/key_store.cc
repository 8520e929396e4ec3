#include "paddle_like/client/key_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/optim/update_rules.h"

namespace pl {

int64_t KeySpec::floats() const {
  if (kind == ParamKind::kSparse) return dim;
  int64_t n = shape.empty() ? 0 : 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<std::unique_ptr<KeyStore>> KeyStore::Declare(const std::vector<KeySpec>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("no keys declared");
  std::unique_ptr<KeyStore> store(new KeyStore());
  for (const KeySpec& k : specs) {
    if (k.name.empty()) return absl::InvalidArgumentError("a key has no name");
    if (store->index_.contains(k.name)) return absl::InvalidArgumentError("key '" + k.name + "' is declared twice");
    if (k.floats() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key '", k.name, "' has ",
          k.kind == ParamKind::kDense ? "shape [" + absl::StrJoin(k.shape, ", ") + "]" : absl::StrCat("dim ", k.dim),
          ": it must hold at least one float"));
    }
    if (k.num_rows < 0) return absl::InvalidArgumentError(absl::StrCat("key '", k.name, "' has num_rows ", k.num_rows));
    if (k.policy.admit_after < 0 || k.policy.admit_after > kMaxAdmitAfter) {
      return absl::InvalidArgumentError(absl::StrCat("key '", k.name, "' has admit_after ", k.policy.admit_after,
                                                     ": it must be in [0, ", kMaxAdmitAfter, "]"));
    }
    if (k.policy.evict_after_s < 0 || k.policy.evict_after_s > kMaxEvictAfterSeconds) {
      return absl::InvalidArgumentError(absl::StrCat("key '", k.name, "' has evict_after_s ", k.policy.evict_after_s,
                                                     ": it must be in [0, ", kMaxEvictAfterSeconds, "]"));
    }
    if (k.policy.optimizer) {
      if (Status valid = ValidateOptimizerSpec(*k.policy.optimizer); !valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("key '", k.name, "': its optimizer: ", valid.message()));
      }
    }
    auto p = std::make_unique<Parameter>();
    p->kind = k.kind;
    p->init = k.init;
    if (k.kind == ParamKind::kDense) {
      // The pservers draw the initial values; these are overwritten by the first pull.
      p->var = Variable(Tensor::Zeros(k.shape), /*requires_grad=*/true);
    } else {
      p->table = std::make_shared<SparseTable>(k.name, k.dim, k.num_rows, k.init);
      p->table->set_policy(k.policy);
    }
    store->Add(k.name, p.get());
    store->owned_.push_back(std::move(p));
  }
  return store;
}

std::unique_ptr<KeyStore> KeyStore::Of(Module& module) {
  std::unique_ptr<KeyStore> store(new KeyStore());
  for (const NamedParameter& np : module.NamedParameters()) store->Add(np.name, np.param);
  return store;
}

void KeyStore::Add(const std::string& name, Parameter* p) {
  keys_.push_back({name, p});
  index_[name] = p;
}

StatusOr<Parameter*> KeyStore::Find(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  std::vector<std::string> known;
  for (const NamedParameter& np : keys_) known.push_back(np.name);
  return absl::NotFoundError(absl::StrCat("no key '", name, "' (known: ", absl::StrJoin(known, ", "), ")"));
}

}  // namespace pl
