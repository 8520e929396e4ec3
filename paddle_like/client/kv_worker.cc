#include "paddle_like/client/kv_worker.h"

#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pl {

KVWorker::KVWorker(std::vector<KeySpec> keys, ParameterClientOptions options, ParameterClient::Resolver resolve,
                   const std::atomic<bool>* stop)
    : specs_(std::move(keys)) {
  StatusOr<std::unique_ptr<KeyStore>> store = KeyStore::Declare(specs_);
  if (!store.ok()) {
    bad_keys_ = store.status();
    return;
  }
  for (size_t i = 0; i < specs_.size(); ++i) index_[specs_[i].name] = i;
  // The worker writes every gradient it sends afresh; a sent one must not linger.
  options.zero_gradients_after_push = true;
  options.bind_parameters_to_shared_memory = false;
  client_ = std::make_unique<ParameterClient>(*std::move(store), std::move(options), std::move(resolve), stop);
}

KVWorker::~KVWorker() = default;

Status KVWorker::Connect() {
  PL_RETURN_IF_ERROR(bad_keys_);
  PL_ASSIGN_OR_RETURN(Handle h, Submit([this] { return client_->Connect(); }));
  return Wait(h);
}

StatusOr<const KeySpec*> KVWorker::Check(const KeyValues& kv, bool values, const char* call) const {
  auto it = index_.find(kv.key);
  if (it == index_.end()) {
    std::vector<std::string> known;
    for (const KeySpec& k : specs_) known.push_back(k.name);
    return absl::NotFoundError(absl::StrCat(call, ": no key '", kv.key, "' (declared: ", absl::StrJoin(known, ", "), ")"));
  }
  const KeySpec& spec = specs_[it->second];
  if (spec.kind == ParamKind::kDense) {
    if (!kv.ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": key '", kv.key, "' is dense and travels whole; ",
                                                     kv.ids.size(), " ids given"));
    }
    if (values && static_cast<int64_t>(kv.values.size()) != spec.floats()) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": key '", kv.key, "' holds ", spec.floats(), " floats, ",
                                                     kv.values.size(), " given"));
    }
    return &spec;
  }
  for (int64_t id : kv.ids) {
    if (id < 0 || (spec.num_rows > 0 && id >= spec.num_rows)) {
      return absl::OutOfRangeError(absl::StrCat(call, ": id ", id, " of key '", kv.key, "' is outside [0, ",
                                                spec.num_rows > 0 ? absl::StrCat(spec.num_rows) : "2^63", ")"));
    }
  }
  if (values && static_cast<int64_t>(kv.values.size()) != static_cast<int64_t>(kv.ids.size()) * spec.floats()) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": key '", kv.key, "' has rows of ", spec.floats(), " floats: ",
                                                   kv.ids.size(), " ids need ", kv.ids.size() * spec.floats(),
                                                   " values, ", kv.values.size(), " given"));
  }
  return &spec;
}

StatusOr<KVWorker::Handle> KVWorker::Submit(std::function<Status()> work) {
  PL_RETURN_IF_ERROR(bad_keys_);
  std::lock_guard<std::mutex> lock(mu_);
  const Handle h = ++next_;
  pending_.emplace(h, worker_.Run(std::move(work)));
  return h;
}

Status KVWorker::Wait(Handle handle) {
  std::future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(handle);
    if (it == pending_.end()) {
      return absl::NotFoundError(absl::StrCat("handle ", handle, " was never given out or was waited for already"));
    }
    done = std::move(it->second);
    pending_.erase(it);
  }
  return done.get();
}

namespace {

// The calls' input, checked before it is queued: one mention of each key.
Status CheckDistinct(const std::vector<KeyValues>& kvs, const char* call) {
  std::set<std::string> seen;
  for (const KeyValues& kv : kvs) {
    if (!seen.insert(kv.key).second) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": key '", kv.key, "' named twice in one call"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<KVWorker::Handle> KVWorker::Push(std::vector<KeyValues> gradients, int64_t num_samples) {
  PL_RETURN_IF_ERROR(bad_keys_);
  PL_RETURN_IF_ERROR(CheckDistinct(gradients, "push"));
  for (const KeyValues& kv : gradients) PL_RETURN_IF_ERROR(Check(kv, /*values=*/true, "push").status());
  if (num_samples <= 0) return absl::InvalidArgumentError(absl::StrCat("push: num_samples ", num_samples));
  return Submit([this, g = std::move(gradients), num_samples] { return RunPush(g, num_samples, nullptr, nullptr); });
}

StatusOr<KVWorker::Handle> KVWorker::Pull(std::vector<KeyValues> requests, std::vector<KeyValues>* out) {
  PL_RETURN_IF_ERROR(bad_keys_);
  if (out == nullptr) return absl::InvalidArgumentError("pull: no output given");
  PL_RETURN_IF_ERROR(CheckDistinct(requests, "pull"));
  for (const KeyValues& kv : requests) PL_RETURN_IF_ERROR(Check(kv, /*values=*/false, "pull").status());
  return Submit([this, r = std::move(requests), out] { return RunPull(r, out); });
}

StatusOr<KVWorker::Handle> KVWorker::PushPull(std::vector<KeyValues> gradients, int64_t num_samples,
                                              std::vector<KeyValues>* out) {
  PL_RETURN_IF_ERROR(bad_keys_);
  if (out == nullptr) return absl::InvalidArgumentError("push-pull: no output given");
  PL_RETURN_IF_ERROR(CheckDistinct(gradients, "push-pull"));
  for (const KeyValues& kv : gradients) PL_RETURN_IF_ERROR(Check(kv, /*values=*/true, "push-pull").status());
  if (num_samples <= 0) return absl::InvalidArgumentError(absl::StrCat("push-pull: num_samples ", num_samples));
  return Submit([this, g = std::move(gradients), num_samples, out] { return RunPush(g, num_samples, &g, out); });
}

void KVWorker::SplitKeys(const std::vector<KeyValues>& requests, std::vector<std::string>* dense,
                         SparseIds* sparse) const {
  for (const KeyValues& kv : requests) {
    if (specs_[index_.at(kv.key)].kind == ParamKind::kDense) {
      dense->push_back(kv.key);
    } else {
      sparse->emplace_back(kv.key, kv.ids);
    }
  }
}

Status KVWorker::RunPush(const std::vector<KeyValues>& gradients, int64_t num_samples,
                         const std::vector<KeyValues>* pull, std::vector<KeyValues>* out) {
  for (const KeyValues& kv : gradients) {
    PL_ASSIGN_OR_RETURN(Parameter * p, client_->keys().Find(kv.key));
    if (p->kind == ParamKind::kDense) {
      std::memcpy(p->var.MutableGrad().f32(), kv.values.data(), kv.values.size() * sizeof(float));
    } else {
      const int64_t dim = p->table->dim();
      for (size_t k = 0; k < kv.ids.size(); ++k) p->table->AccumulateGrad(kv.ids[k], kv.values.data() + k * dim);
    }
  }
  std::vector<std::string> dense;
  SparseIds sparse;
  SplitKeys(gradients, &dense, &sparse);
  if (pull == nullptr) return client_->PushKeys(dense, num_samples);
  PL_RETURN_IF_ERROR(client_->PushThenPullKeys(dense, num_samples, sparse));
  return CopyOut(*pull, out);
}

Status KVWorker::RunPull(const std::vector<KeyValues>& requests, std::vector<KeyValues>* out) {
  std::vector<std::string> dense;
  SparseIds sparse;
  SplitKeys(requests, &dense, &sparse);
  PL_RETURN_IF_ERROR(client_->PullKeys(dense, sparse));
  return CopyOut(requests, out);
}

Status KVWorker::CopyOut(const std::vector<KeyValues>& requests, std::vector<KeyValues>* out) {
  out->clear();
  out->reserve(requests.size());
  for (const KeyValues& r : requests) {
    PL_ASSIGN_OR_RETURN(Parameter * p, client_->keys().Find(r.key));
    KeyValues kv{r.key, r.ids, {}};
    if (p->kind == ParamKind::kDense) {
      const Tensor& v = p->var.value();
      kv.values.assign(v.f32(), v.f32() + v.numel());
    } else {
      const int64_t dim = p->table->dim();
      kv.values.resize(r.ids.size() * dim);
      for (size_t k = 0; k < r.ids.size(); ++k) {
        const float* row = p->table->rows().Find(r.ids[k]);
        if (row == nullptr) {
          return absl::DataLossError(absl::StrCat("pull: the pservers sent no row ", r.ids[k], " of '", r.key, "'"));
        }
        std::memcpy(kv.values.data() + k * dim, row, dim * sizeof(float));
      }
    }
    out->push_back(std::move(kv));
  }
  return absl::OkStatus();
}

}  // namespace pl
