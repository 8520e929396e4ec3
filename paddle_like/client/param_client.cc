#include "paddle_like/client/param_client.h"

#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/client/backoff.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/client/pserver_shard.h"

namespace pl {

ParameterClient::ParameterClient(std::unique_ptr<KeyStore> keys, ParameterClientOptions options, Resolver resolve,
                                 const std::atomic<bool>* stop)
    : keys_(std::move(keys)),
      options_(std::move(options)),
      shards_(keys_.get(), &options_, std::move(resolve), stop) {}

ParameterClient::~ParameterClient() {
  if (in_flight_.valid()) in_flight_.wait();
}

Status ParameterClient::Connect() { return shards_.Connect(); }

Status ParameterClient::Pull(const SparseIds& sparse_ids) {
  PL_RETURN_IF_ERROR(Wait());
  PL_RETURN_IF_ERROR(BuildPull(sparse_ids));
  std::vector<PullFrame> responses(options_.num_pservers);
  for (auto& sh : shards_) shards_.TryAttach(*sh);
  PL_RETURN_IF_ERROR(
      shards_.ForEachShard([&](int i) { return shards_.CallWithRetry(i, shards_.PullAttempt(&responses[i]), "pull"); }));
  return InstallPull(responses);
}

namespace {
// Whether the shard's pull names exactly the blocks its push carries, in its order: then
// a push that brings the new values back is the whole exchange.
bool PullsWhatItPushes(const PserverShard& s) {
  if (s.pull.dense_size() != static_cast<int>(s.push.dense().size())) return false;
  for (int i = 0; i < s.pull.dense_size(); ++i) {
    const DenseFramePayload& d = s.push.dense()[i];
    if (s.pull.dense(i).param() != d.param || s.pull.dense(i).block() != d.block) return false;
  }
  return true;
}
}  // namespace

void ParameterClient::PreparePush(int64_t num_samples, bool own_copies, bool then_pull, bool overlap) {
  for (auto& sh : shards_) shards_.TryAttach(*sh);
  BuildPush(num_samples);
  for (auto& sh : shards_) {
    PserverShard& s = *sh;
    s.values_came = false;
    int64_t values = 0;  // counted before Prepare, which may round them into 2 bytes each
    for (const DenseFramePayload& d : s.push.dense()) values += d.values.size();
    s.pushing = &s.channel();
    if (!s.pushing->Prepare(s.push, own_copies, &s.prepared)) {
      // Cannot happen: every block BuildPush lists is one of the shard's slots; if it
      // did, gRPC is right.
      s.region.reset();
      s.shm_refusal = "the model's blocks do not match the shared-memory layout";
      s.pushing = &s.grpc;
      s.grpc.Prepare(s.push, own_copies, &s.prepared);
    }
    counters_.bytes_pushed += s.pushing->WireBytes(values);
    s.one_call = s.pushing->push_brings_values() && then_pull && !(overlap && s.pushing->duplex()) &&
                 !options_.sync && !options_.defer_apply && s.pull.sparse_size() == 0 && PullsWhatItPushes(s);
  }
}

Status ParameterClient::Push(int64_t num_samples) {
  PL_RETURN_IF_ERROR(Wait());
  PreparePush(num_samples, /*own_copies=*/false, /*then_pull=*/false);
  std::vector<proto::PushResponse> responses(options_.num_pservers);
  PL_RETURN_IF_ERROR(shards_.ForEachShard([&](int i) {
    return shards_.CallWithRetry(i, shards_.PushAttempt(&responses[i], /*values=*/nullptr), "push");
  }));
  PushDone();
  ZeroSentGradients();
  return absl::OkStatus();
}

Status ParameterClient::PushAndPull(int64_t num_samples, const SparseIds& next_sparse_ids) {
  return Exchange(num_samples, next_sparse_ids, /*overlap=*/true);
}

Status ParameterClient::PushThenPull(int64_t num_samples, const SparseIds& next_sparse_ids) {
  return Exchange(num_samples, next_sparse_ids, /*overlap=*/false);
}

Status ParameterClient::PushChangesThenPull(int64_t num_samples) {
  for (const NamedParameter& np : keys_->keys()) {
    if (np.param->kind != ParamKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat("local steps move dense parameters only; '", np.name,
                                                     "' is a sparse table"));
    }
  }
  push_changes_ = true;
  Status s = PushThenPull(num_samples, SparseIds());
  push_changes_ = false;
  return s;
}

Status ParameterClient::Exchange(int64_t num_samples, const SparseIds& next_sparse_ids, bool overlap) {
  PL_RETURN_IF_ERROR(Wait());
  if (options_.sync) {  // a sync step must be complete before its parameters are read
    PL_RETURN_IF_ERROR(Push(num_samples));
    return Pull(next_sparse_ids);
  }
  PL_RETURN_IF_ERROR(BuildPull(next_sparse_ids));
  PreparePush(num_samples, /*own_copies=*/false, /*then_pull=*/true, overlap);
  const int P = options_.num_pservers;
  std::vector<proto::PushResponse> pushed(P);
  std::vector<PullFrame> pulled(P);
  PL_RETURN_IF_ERROR(shards_.ForEachShard([&](int i) { return shards_.ExchangeShard(i, overlap, &pushed[i], &pulled[i]); }));
  PushDone();
  ZeroSentGradients();
  return InstallPull(pulled);
}

Status ParameterClient::PullStep(int64_t step, const SparseIds& sparse_ids) {
  PL_RETURN_IF_ERROR(Wait());
  PL_RETURN_IF_ERROR(BuildPull(sparse_ids));
  for (auto& sh : shards_) {
    sh->pull.set_min_version(step);
    sh->pull.set_exact_version(true);
  }
  const int P = options_.num_pservers;
  std::vector<PullFrame> responses(P);
  PL_RETURN_IF_ERROR(
      shards_.ForEachShard([&](int i) { return shards_.CallWithRetry(i, shards_.PullAttempt(&responses[i]), "pull"); }));
  return InstallPull(responses);
}

Status ParameterClient::PushMicroBatch(int64_t step, int32_t virtual_trainer, const std::string& step_expects,
                                       int64_t num_samples) {
  const MicroBatchTag tag{step, virtual_trainer, &step_expects};
  micro_batch_ = &tag;
  Status s = Push(num_samples);
  micro_batch_ = nullptr;
  return s;
}

StatusOr<int64_t> ParameterClient::WaitForStep(int64_t step, absl::Duration timeout) {
  const int P = options_.num_pservers;
  std::vector<int64_t> versions(P, 0);
  PL_RETURN_IF_ERROR(shards_.ForEachShard([&](int i) {
    PL_ASSIGN_OR_RETURN(versions[i], shards_.WaitForVersion(i, step, timeout));
    return absl::OkStatus();
  }));
  return P == 0 ? step : *std::min_element(versions.begin(), versions.end());
}

Status ParameterClient::WithDenseKeys(const std::vector<std::string>& dense, const std::function<Status()>& call) {
  PL_RETURN_IF_ERROR(Wait());  // an exchange in flight moves every dense parameter
  absl::flat_hash_set<std::string> keys;
  for (const std::string& name : dense) {
    PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(name));
    if (p->kind != ParamKind::kDense) {
      return absl::InvalidArgumentError("'" + name + "' is a sparse table: its rows travel by id, not by name");
    }
    keys.insert(name);
  }
  only_dense_ = &keys;
  Status s = call();
  only_dense_ = nullptr;
  return s;
}

Status ParameterClient::PullKeys(const std::vector<std::string>& dense, const SparseIds& sparse_ids) {
  return WithDenseKeys(dense, [&] { return Pull(sparse_ids); });
}

Status ParameterClient::PushKeys(const std::vector<std::string>& dense, int64_t num_samples) {
  return WithDenseKeys(dense, [&] { return Push(num_samples); });
}

Status ParameterClient::PushThenPullKeys(const std::vector<std::string>& dense, int64_t num_samples,
                                         const SparseIds& next_sparse_ids) {
  return WithDenseKeys(dense, [&] { return PushThenPull(num_samples, next_sparse_ids); });
}

Status ParameterClient::StartExchange(int64_t num_samples) {
  PL_RETURN_IF_ERROR(Wait());
  if (options_.sync) return absl::FailedPreconditionError("StartExchange is for async training");
  if (options_.bind_parameters_to_shared_memory) {
    // The next step would write its gradients into the region this exchange sends.
    return absl::FailedPreconditionError("StartExchange needs bind_parameters_to_shared_memory off");
  }
  PL_RETURN_IF_ERROR(BuildPull({}));
  // The gradients leave the tensors now (into the regions or the frames' own buffers),
  // so the next step may accumulate into them while this exchange runs; or the tensors
  // themselves go, and zeroed ones take their place.
  // Both directions at once, as PushAndPull: a link or connection between hosts then
  // carries the push and the pull in the time of one, which the trainer's step hides.
  const bool swap = options_.swap_gradients_in_exchange && options_.zero_gradients_after_push;
  PreparePush(num_samples, /*own_copies=*/!swap, /*then_pull=*/true, /*overlap=*/true);
  if (swap) {
    SwapOutGradients();
  } else {
    ZeroSentGradients();
  }
  in_flight_pulled_.clear();
  in_flight_pulled_.resize(options_.num_pservers);
  in_flight_pushed_.assign(options_.num_pservers, proto::PushResponse());
  in_flight_ = exchange_thread_.Run([this] {
    const auto started = std::chrono::steady_clock::now();
    Status s = shards_.ForEachShard(
        [this](int i) { return shards_.ExchangeShard(i, /*overlap=*/true, &in_flight_pushed_[i], &in_flight_pulled_[i]); });
    // Sent (or given up): zeroed here, beside the trainer's next step, for the one after.
    for (auto& [name, grad] : in_flight_grads_) grad.SetZero();
    background_exchange_ns_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count(),
        std::memory_order_relaxed);
    return s;
  });
  return absl::OkStatus();
}

void ParameterClient::SwapOutGradients() {
  for (const NamedParameter& np : keys_->keys()) {
    if (np.param->kind != ParamKind::kDense || !Selected(np.name)) continue;
    VariableNode* node = np.param->var.node();
    if (!node->grad.defined()) continue;
    auto spare = spare_grads_.find(np.name);
    Tensor fresh;
    if (spare != spare_grads_.end() && spare->second.shape() == node->grad.shape()) {
      fresh = std::move(spare->second);
      spare_grads_.erase(spare);
    } else {
      fresh = Tensor::Zeros(node->grad.shape());
    }
    in_flight_grads_.emplace_back(np.name, std::move(node->grad));
    node->grad = std::move(fresh);
  }
}

Status ParameterClient::StartChangesExchange(int64_t num_samples) {
  PL_RETURN_IF_ERROR(Wait());
  push_changes_ = true;
  Status s = StartExchange(num_samples);
  push_changes_ = false;
  return s;
}

Status ParameterClient::FinishExchange() { return FinishExchange(nullptr); }

Status ParameterClient::FinishExchange(const PulledBlockInstaller& install) {
  if (!in_flight_.valid()) return absl::FailedPreconditionError("no exchange in flight");
  Status s = in_flight_.get();
  for (auto& [name, grad] : in_flight_grads_) spare_grads_[name] = std::move(grad);
  in_flight_grads_.clear();
  if (!s.ok()) return s;
  PushDone();
  return InstallPull(in_flight_pulled_, install);
}

Status ParameterClient::Wait() {
  if (!in_flight_.valid()) return absl::OkStatus();
  return FinishExchange();
}

Status ParameterClient::BuildPull(const SparseIds& sparse_ids) {
  const int P = options_.num_pservers;
  const std::vector<NamedParameter>& params = keys_->keys();
  for (auto& sh : shards_) {
    sh->pull.Clear();
    sh->pull.set_trainer_id(trainer_id_);
    sh->pull.set_min_version(options_.sync ? sh->wait_version : 0);
    sh->pull.set_bf16(options_.wire_dtype == WireDtype::kBfloat16);
  }
  // Dense: every block of every dense parameter, each to its owner.
  for (const NamedParameter& np : params) {
    if (np.param->kind != ParamKind::kDense || !Selected(np.name)) continue;
    const int64_t blocks = NumBlocks(np.param->var.value().numel(), kDefaultBlockSize);
    for (int64_t b = 0; b < blocks; ++b) {
      proto::DenseBlock* blk = shards_[ShardOfDenseBlock(np.name, b, P)].pull.add_dense();
      blk->set_param(np.name);
      blk->set_block(static_cast<int32_t>(b));
    }
  }
  // Sparse: only the requested rows.
  for (const auto& [name, ids] : sparse_ids) {
    PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(name));
    if (p->kind != ParamKind::kSparse) return absl::InvalidArgumentError("'" + name + "' is not a sparse table");
    std::vector<proto::SparseRowsMsg*> per_shard(P, nullptr);
    for (int64_t id : ids) {
      const int owner = ShardOfRow(id, P);
      if (!per_shard[owner]) {
        per_shard[owner] = shards_[owner].pull.add_sparse();
        per_shard[owner]->set_table(name);
        per_shard[owner]->set_dim(p->table->dim());
      }
      per_shard[owner]->add_ids(id);
    }
  }
  return absl::OkStatus();
}

Status ParameterClient::InstallPull(const std::vector<PullFrame>& responses, const PulledBlockInstaller& install) {
  const int P = options_.num_pservers;
  // The tables hold exactly the rows pulled for this step.
  for (const auto& sh : shards_) {
    for (const proto::SparseRowsMsg& rows : sh->pull.sparse()) {
      PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(rows.table()));
      p->table->rows().Clear();
    }
  }
  // The dense blocks' copies into their parameters, run on several threads at the end:
  // a large model's pull is a memory copy the size of the model.
  struct Copy {
    const FloatPieces* from;
    float* to;
    Parameter* param;
    int64_t offset;
  };
  std::vector<Copy> copies;
  int64_t copied_floats = 0;
  for (int i = 0; i < P; ++i) {
    const proto::PullResponse& r = responses[i].header();
    shards_[i].version = r.version();
    for (const DenseFramePayload& blk : responses[i].dense()) {
      PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(blk.param));
      const Tensor& v = p->var.value();
      const int64_t offset = static_cast<int64_t>(blk.block) * kDefaultBlockSize;
      const int64_t n = std::min<int64_t>(kDefaultBlockSize, v.numel() - offset);
      if (offset < 0 || n <= 0 || blk.values.num_bytes() != n * 4) {
        return absl::DataLossError(absl::StrCat("pull: pserver ", i, " sent ", blk.values.num_bytes(),
                                                " bytes for block ", blk.block, " of '", blk.param,
                                                "', expected ", std::max<int64_t>(n, 0) * 4));
      }
      // A parameter bound to its shared-memory region already holds the values there.
      if (blk.values.contiguous() != v.f32() + offset) {
        copies.push_back({&blk.values, v.f32() + offset, p, offset});
        copied_floats += n;
      } else if (install) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pull: block ", blk.block, " of '", blk.param, "' arrived in place (a parameter bound to shared memory), "
            "so it cannot be installed by a caller's rule"));
      }
      counters_.bytes_pulled += shards_[i].channel().WireBytes(n);
    }
    for (const proto::SparseRowsMsg& rows : r.sparse()) {
      PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(rows.table()));
      const int64_t dim = p->table->dim();
      if (static_cast<int64_t>(rows.values().size()) != rows.ids_size() * dim * 4) {
        return absl::DataLossError(absl::StrCat("pull: pserver ", i, " sent a malformed row set for '",
                                                rows.table(), "'"));
      }
      const float* values = reinterpret_cast<const float*>(rows.values().data());
      for (int k = 0; k < rows.ids_size(); ++k) p->table->SetRow(rows.ids(k), values + k * dim);
      counters_.sparse_rows_pulled += rows.ids_size();
      counters_.bytes_pulled += rows.values().size();
    }
  }
  ParallelFor(static_cast<int64_t>(copies.size()), ThreadsForDense(copied_floats), [&](int64_t k) {
    if (install) {
      install(copies[k].param, copies[k].offset, *copies[k].from);
    } else {
      copies[k].from->CopyTo(copies[k].to);
    }
  });
  ++counters_.pulls;
  return absl::OkStatus();
}

void ParameterClient::PushDone() {
  double staleness = 0;
  for (const auto& sh : shards_) staleness += options_.sync ? 0 : sh->staleness;
  staleness_ = shards_.size() == 0 ? 0 : staleness / shards_.size();
  for (auto& sh : shards_) {
    sh->wait_version = sh->push.header().step() + 1;
    sh->push.Clear();  // lets go of the gradient memory
    sh->pushing = nullptr;
  }
  ++counters_.pushes;
}

void ParameterClient::ZeroSentGradients() {
  // Frames that sent the gradients in place are done with them: only now may they change.
  if (!options_.zero_gradients_after_push) return;
  for (const NamedParameter& np : keys_->keys()) {
    if (np.param->kind == ParamKind::kDense && Selected(np.name) && np.param->var.grad().defined()) {
      np.param->var.grad().SetZero();
    }
  }
}

void ParameterClient::BuildPush(int64_t num_samples) {
  const int P = options_.num_pservers;
  for (auto& sh : shards_) {
    sh->push.Clear();
    sh->push.header().set_step(sh->version);
    sh->push.header().set_num_samples(num_samples);
    sh->push.header().set_defer_apply(options_.defer_apply && !options_.sync);
    sh->push.header().set_delta(push_changes_);
    if (micro_batch_ != nullptr) {
      sh->push.header().set_step(micro_batch_->step);
      sh->push.header().set_virtual_trainer(micro_batch_->virtual_trainer);
      sh->push.header().set_step_expects(*micro_batch_->step_expects);
    }
  }
  for (const NamedParameter& np : keys_->keys()) {
    Parameter* p = np.param;
    if (p->kind == ParamKind::kDense && !Selected(np.name)) continue;
    if (p->kind == ParamKind::kDense) {
      const Tensor& g = p->var.grad();
      const Tensor& v = p->var.value();
      const int64_t blocks = NumBlocks(v.numel(), kDefaultBlockSize);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t offset = b * kDefaultBlockSize;
        const int64_t n = std::min<int64_t>(kDefaultBlockSize, v.numel() - offset);
        PushFrame& frame = shards_[ShardOfDenseBlock(np.name, b, P)].push;
        // In place: the shard's channel copies or rounds them as it sends (Prepare).
        if (g.defined()) {
          frame.AddDenseRef(np.name, static_cast<int32_t>(b), g.f32() + offset, n, g.storage());
        } else {
          std::memset(frame.AddDenseBuffer(np.name, static_cast<int32_t>(b), n), 0, n * 4);  // no gradient yet
        }
      }
    } else {
      SparseTable& t = *p->table;
      const SparseRows& g = t.grad();
      std::vector<proto::SparseRowsMsg*> per_shard(P, nullptr);
      for (size_t k = 0; k < g.size(); ++k) {
        const int64_t id = g.ids()[k];
        const int owner = ShardOfRow(id, P);
        if (!per_shard[owner]) {
          per_shard[owner] = shards_[owner].push.header().add_sparse();
          per_shard[owner]->set_table(np.name);
          per_shard[owner]->set_dim(t.dim());
        }
        per_shard[owner]->add_ids(id);
        per_shard[owner]->mutable_values()->append(
            reinterpret_cast<const char*>(g.values().data() + k * t.dim()), t.dim() * 4);
      }
      counters_.sparse_rows_pushed += g.size();
      counters_.bytes_pushed += g.size() * t.dim() * 4;
      t.ZeroGrad();
    }
  }
  for (auto& sh : shards_) {
    sh->push.header().set_trainer_id(trainer_id_);
    // Exactly once: the pserver applies each number once, however often it is retried.
    sh->push.header().set_client_id(shards_.client_id());
    sh->push.header().set_push_id(++sh->pushes);
  }
}

}  // namespace pl
