// ShardStore: the configuration, Init, and the calls that span the dense and sparse
// halves (shard_store.h).
#include "pserver/store/shard_store.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/sharding.h"

namespace pl::pserver {

Status ShardStore::CheckInitialized() const {
  if (!initialized()) {
    // NOT_FOUND, as for any parameter this shard does not hold: a trainer answers it by
    // initialising the shard again (a pserver restarted without a checkpoint).
    return absl::NotFoundError(
        absl::StrCat("pserver shard ", index_, " holds no parameters: it is not initialised (call Init first)"));
  }
  return absl::OkStatus();
}

const char* ShardStore::WhyNotDense(const std::string& name) const {
  return sparse_.Holds(name) ? " (it is a sparse table)" : " (not initialised here)";
}

const char* ShardStore::WhyNotTable(const std::string& name) const {
  return dense_.Holds(name) ? " (it is a dense parameter)" : " (not initialised here)";
}

// ---------------------------------------------------------------------------- Init

namespace {
bool SameShape(const proto::ParamSpec& a, const proto::ParamSpec& b) {
  if (a.kind() != b.kind()) return false;
  if (a.kind() == proto::ParamSpec::SPARSE) return a.dim() == b.dim() && a.num_rows() == b.num_rows();
  return std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()) &&
         BlockSizeOf(a) == BlockSizeOf(b);
}
}  // namespace

Status ShardStore::CheckCompatible(const proto::InitRequest& request) const {
  PL_ASSIGN_OR_RETURN(OptimizerSpec opt, OptimizerFromProto(request.optimizer()));
  if (opt.ToString() != optimizer_.ToString()) {
    return absl::FailedPreconditionError(absl::StrCat("pserver shard ", index_, " runs optimizer ",
                                                      optimizer_.ToString(), "; the request asks for ",
                                                      opt.ToString()));
  }
  if (request.seed() != seed_ || request.sync() != sync_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pserver shard ", index_, " was initialised with seed ", seed_, (sync_ ? ", sync" : ", async"),
        "; the request has seed ", request.seed(), (request.sync() ? ", sync" : ", async")));
  }
  for (const proto::ParamSpec& spec : request.params()) {
    const proto::ParamSpec* held = dense_.Spec(spec.name());
    if (held == nullptr) held = sparse_.Spec(spec.name());
    if (held == nullptr) {
      // An initialised shard holds its job's model: a later Init may repeat it (each
      // trainer sends one) but not grow it, which would let any trainer certificate
      // take the pserver's memory or slip parameters into the job.
      return absl::FailedPreconditionError(absl::StrCat(
          "pserver shard ", index_, " already holds its job's model (", dense_.size() + sparse_.size(),
          " parameters); the request adds '", spec.name(), "', which the model does not have"));
    }
    if (held->optimizer().SerializeAsString() != spec.optimizer().SerializeAsString()) {
      auto describe = [this](const proto::ParamSpec& s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (!s.has_optimizer()) return absl::StrCat("the job's (", optimizer_.ToString(), ")");
        StatusOr<OptimizerSpec> own = OptimizerFromProto(s.optimizer());
        return own.ok() ? own->ToString() : std::string(own.status().message());
      };
      return absl::FailedPreconditionError(absl::StrCat("table '", spec.name(), "': this pserver updates it with ",
                                                        describe(*held), "; the request asks for ", describe(spec)));
    }
    if (!SameShape(*held, spec) || held->init_kind() != spec.init_kind() ||
        held->init_scale() != spec.init_scale()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter '", spec.name(), "': this pserver holds ", DescribeSpec(*held), " (init ",
          held->init_kind(), "/", held->init_scale(), "), the request has ", DescribeSpec(spec),
          " (init ", spec.init_kind(), "/", spec.init_scale(), ")"));
    }
  }
  return absl::OkStatus();
}

StatusOr<bool> ShardStore::Init(const proto::InitRequest& request) {
  // Everything is checked before anything is created.
  PL_ASSIGN_OR_RETURN(OptimizerSpec opt, OptimizerFromProto(request.optimizer()));
  PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(opt));
  absl::flat_hash_set<std::string> names;
  for (const proto::ParamSpec& spec : request.params()) {
    PL_RETURN_IF_ERROR(ValidateParamSpec(spec));
    if (!names.insert(spec.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name(), "' appears twice in the Init request"));
    }
  }
  absl::WriterMutexLock l(&mu_);
  const bool created = !initialized();
  if (!created) PL_RETURN_IF_ERROR(CheckCompatible(request));
  PL_RETURN_IF_ERROR(CheckFits(request, created ? opt : optimizer_));
  if (created) {
    optimizer_ = opt;
    rule_ = rule;
    optimizer_proto_ = request.optimizer();
    seed_ = request.seed();
    sync_ = request.sync();
    sparse_.Configure(seed_, optimizer_, *rule_);
  }
  for (const proto::ParamSpec& spec : request.params()) {
    if (dense_.Holds(spec.name()) || sparse_.Holds(spec.name())) continue;
    PL_RETURN_IF_ERROR(AddParam(spec));
  }
  initialized_.store(true, std::memory_order_release);
  CapSparseRowsWithinBudget();
  return created;
}

void ShardStore::set_memory_budget(int64_t bytes, bool cap_sparse_rows) {
  absl::ReaderMutexLock l(&mu_);
  memory_budget_.store(bytes);
  sparse_cap_follows_budget_.store(cap_sparse_rows);
  CapSparseRowsWithinBudget();
}

void ShardStore::CapSparseRowsWithinBudget() {
  const int64_t budget = memory_budget_.load();
  if (!sparse_cap_follows_budget_.load() || budget <= 0) return;
  const int64_t dense_bytes = dense_.elements() * 4 * (1 + NumSlots(optimizer_.kind));
  const int64_t cap = std::max(budget - dense_bytes, budget / 16);
  if (cap == eviction_.cap_bytes()) return;
  eviction_.Enable(cap);
  log::Info(absl::StrFormat("sparse rows capped at %.0f MB: what the dense parameters (%.0f MB) leave of the "
                            "%.0f MB memory budget (pl-pserver --sparse_memory_mb sets a cap of its own)",
                            cap / 1048576.0, dense_bytes / 1048576.0, budget / 1048576.0));
}

Status ShardStore::CheckFits(const proto::InitRequest& request, const OptimizerSpec& optimizer) const {
  const int64_t budget = memory_budget_.load();
  if (budget <= 0) return absl::OkStatus();
  const int64_t per_float = 4 * (1 + NumSlots(optimizer.kind));
  int64_t adding = 0;
  for (const proto::ParamSpec& spec : request.params()) {
    if (spec.kind() != proto::ParamSpec::DENSE || dense_.Holds(spec.name())) continue;
    const int64_t numel = DenseNumel(spec), block = BlockSizeOf(spec);
    for (int64_t b = 0; b < NumBlocks(numel, block); ++b) {
      if (ShardOfDenseBlock(spec.name(), b, num_shards_) == index_) adding += std::min(block, numel - b * block);
    }
  }
  const int64_t held = dense_.elements() * per_float;
  if (held + adding * per_float <= budget) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "Init would make this pserver hold %.1f MB of dense parameters and optimizer state (%.1f MB now), past its "
      "budget of %.1f MB (pl-pserver --max_memory_mb); nothing was created",
      (held + adding * per_float) / 1048576.0, held / 1048576.0, budget / 1048576.0));
}

Status ShardStore::AddParam(const proto::ParamSpec& spec, bool initialize_values) {
  PL_ASSIGN_OR_RETURN(InitSpec init, InitSpecFromProto(spec));
  if (spec.kind() == proto::ParamSpec::DENSE) {
    request_payload_bytes_ += dense_.Add(spec, init, seed_, optimizer_, initialize_values);
    return absl::OkStatus();
  }
  PL_ASSIGN_OR_RETURN(int64_t bytes, sparse_.Add(spec, init));
  request_payload_bytes_ += bytes;
  return absl::OkStatus();
}

// ------------------------------------------------------------ pushes and pulls

Status ShardStore::Resolve(const PushFrame& frame, ResolvedPush* out, bool check_finite) const {
  absl::ReaderMutexLock l(&mu_);
  out->delta = frame.header().delta();
  if (out->delta && frame.header().sparse_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("a push of parameter changes (local steps) carries dense blocks only; "
                                                   "it has rows of table '", frame.header().sparse(0).table(), "'"));
  }
  PL_RETURN_IF_ERROR(dense_.Resolve(frame, check_finite, [this](const std::string& n) { return WhyNotDense(n); }, out));
  return sparse_.Resolve(frame.header(), check_finite, [this](const std::string& n) { return WhyNotTable(n); }, out);
}

StatusOr<int64_t> ShardStore::RestoreDense(const google::protobuf::RepeatedPtrField<proto::DenseBlock>& blocks,
                                           int64_t learned_version) {
  PL_RETURN_IF_ERROR(CheckInitialized());
  absl::ReaderMutexLock l(&mu_);
  return dense_.Restore(blocks, *rule_, learned_version, [this](const std::string& n) { return WhyNotDense(n); });
}

void ShardStore::Apply(const ResolvedPush& push) {
  absl::ReaderMutexLock l(&mu_);
  if (push.delta) {
    DenseStore::AddChanges(push.dense, rule_->num_slots());
  } else {
    DenseStore::Apply(push.dense, *rule_);
  }
  sparse_.Apply(push.sparse);
}

void ShardStore::Accumulate(const ResolvedPush& push) {
  DenseStore::Accumulate(push.dense, push.delta);
  SparseStore::Accumulate(push.sparse);
}

void ShardStore::ApplyAccumulated(int contributors, bool keep_previous) {
  absl::ReaderMutexLock l(&mu_);
  dense_.ApplyAccumulated(contributors, *rule_, keep_previous);
  // Sparse rows take the plain mean: a row's pushes in a step are its own count, not
  // the step's contributors, so no noise scale follows from it.
  sparse_.ApplyAccumulated(1.0f / static_cast<float>(std::max(contributors, 1)), keep_previous);
}

Status ShardStore::Read(const proto::PullRequest& request, PullFrame* frame, const DenseDestination& dense_out,
                        bool previous) {
  absl::ReaderMutexLock l(&mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  // The whole request is checked before anything is read: a bad one creates no rows.
  PL_RETURN_IF_ERROR(sparse_.CheckRead(request));
  PL_RETURN_IF_ERROR(
      dense_.Read(request, sync_, [this](const std::string& n) { return WhyNotDense(n); }, frame, dense_out, previous));
  return sparse_.Read(request, &frame->header(), previous);
}

// ------------------------------------------------------------ saving, restoring

std::vector<ShardStore::DensePin> ShardStore::PinDense() const {
  absl::ReaderMutexLock l(&mu_);
  if (!initialized_) return {};
  return dense_.Pin(NumSlots(optimizer_.kind));
}

Status ShardStore::Visit(Visitor* v, Rows rows) const {
  absl::ReaderMutexLock l(&mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  PL_RETURN_IF_ERROR(v->Config(optimizer_proto_, seed_, sync_, dense_.size()));
  PL_RETURN_IF_ERROR(dense_.Visit(v, NumSlots(optimizer_.kind)));
  return sparse_.Visit(v, rows);
}

Status ShardStore::Load(const std::function<Status(Loader*)>& fill) {
  absl::WriterMutexLock l(&mu_);
  if (initialized()) return absl::FailedPreconditionError("LoadState needs a fresh shard; this one is initialised");
  Status s;
  {
    Loader loader(this);
    s = fill(&loader);
  }
  if (!s.ok()) {
    // Nothing half-read stays behind (blocks the fill never reached hold no values):
    // a later Load or Init starts from an empty store.
    dense_.Clear();
    sparse_.Clear();
    request_payload_bytes_ = 0;
    return s;
  }
  initialized_.store(true, std::memory_order_release);
  CapSparseRowsWithinBudget();
  return absl::OkStatus();
}

Status ShardStore::LoadMore(const std::function<Status(Loader*)>& fill) {
  absl::WriterMutexLock l(&mu_);
  if (!initialized()) return absl::FailedPreconditionError("LoadMore needs a shard that holds a state");
  Loader loader(this);
  return fill(&loader);
}

// The Loader's methods run inside Load, which holds store_->mu_ exclusively.

Status ShardStore::Loader::Configure(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  PL_ASSIGN_OR_RETURN(store_->optimizer_, OptimizerFromProto(optimizer));
  PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(store_->optimizer_));
  store_->rule_ = rule;
  store_->optimizer_proto_ = optimizer;
  store_->seed_ = seed;
  store_->sync_ = sync;
  store_->sparse_.Configure(seed, store_->optimizer_, rule);
  return absl::OkStatus();
}

bool ShardStore::Loader::Holds(const std::string& name) const {
  return store_->dense_.Holds(name) || store_->sparse_.Holds(name);
}

StatusOr<size_t> ShardStore::Loader::Add(const proto::ParamSpec& spec) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The state read next fills every block this shard owns (ReadDense refuses fewer),
  // and a fill that fails leaves an empty store: no block is read unset.
  PL_RETURN_IF_ERROR(store_->AddParam(spec, /*initialize_values=*/false));
  return store_->dense_.OwnedBlocks(spec.name(), NumSlots(store_->optimizer_.kind), &warmer_);
}

absl::Span<float> ShardStore::Loader::Block(const std::string& name, int64_t b, int64_t n, int64_t step_record)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return store_->dense_.LoadBlock(name, b, n, step_record, NumSlots(store_->optimizer_.kind));
}

const proto::ParamSpec* ShardStore::Loader::Spec(const std::string& name) const {
  if (const proto::ParamSpec* spec = store_->dense_.Spec(name)) return spec;
  return store_->sparse_.Spec(name);
}

}  // namespace pl::pserver
