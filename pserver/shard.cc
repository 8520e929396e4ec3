#include "pserver/shard.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/dist/sharding.h"
#include "pserver/parallel_for.h"
#include "pserver/shard_internal.h"

namespace pl::pserver {

ParameterShard::ParameterShard(int index, int num_shards) : index_(index), num_shards_(num_shards) {}
ParameterShard::~ParameterShard() { Shutdown(); }

bool ParameterShard::initialized() const {
  absl::ReaderMutexLock l(&params_mu_);
  return initialized_;
}

bool ParameterShard::sync() const {
  absl::ReaderMutexLock l(&params_mu_);
  return sync_;
}

int64_t ParameterShard::version() const {
  absl::MutexLock l(&version_mu_);
  return version_;
}

void ParameterShard::SetVersion(int64_t v) {
  absl::MutexLock l(&version_mu_);
  version_ = v;
  version_cv_.SignalAll();
}

void ParameterShard::Shutdown() {
  {
    absl::MutexLock l(&version_mu_);
    shutdown_ = true;
    version_cv_.SignalAll();
  }
  {
    absl::MutexLock q(&queue_mu_);
    queue_closed_ = true;  // the applier applies what is queued, then exits
  }
  if (applier_.joinable()) applier_.join();
}


ShardCounters ParameterShard::Counters() const {
  ShardCounters c;
  c.version = version();
  c.dense_elements = dense_elements_.load();
  {
    absl::ReaderMutexLock l(&params_mu_);
    for (const auto& [name, t] : sparse_) c.sparse_rows += t->rows.load();
  }
  c.pushes_applied = pushes_applied_.load();
  c.pushes_rejected = pushes_rejected_.load();
  c.sparse_rows_pulled = sparse_rows_pulled_.load();
  c.sparse_rows_pushed = sparse_rows_pushed_.load();
  return c;
}

Status ParameterShard::CheckInitialized() const {
  if (!initialized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("pserver shard ", index_, " is not initialised: call Init first"));
  }
  return absl::OkStatus();
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

Status ParameterShard::CheckCompatible(const proto::InitRequest& request) const {
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
    const proto::ParamSpec* held = nullptr;
    if (auto it = dense_.find(spec.name()); it != dense_.end()) held = &it->second->spec;
    if (auto it = sparse_.find(spec.name()); it != sparse_.end()) held = &it->second->spec;
    if (held == nullptr) continue;
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

StatusOr<proto::InitResponse> ParameterShard::Init(const proto::InitRequest& request) {
  // Everything is checked before anything is created.
  PL_ASSIGN_OR_RETURN(OptimizerSpec opt, OptimizerFromProto(request.optimizer()));
  absl::flat_hash_set<std::string> names;
  for (const proto::ParamSpec& spec : request.params()) {
    PL_RETURN_IF_ERROR(ValidateParamSpec(spec));
    if (!names.insert(spec.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", spec.name(), "' appears twice in the Init request"));
    }
  }
  absl::WriterMutexLock l(&params_mu_);
  const bool created = !initialized_;
  if (initialized_) {
    PL_RETURN_IF_ERROR(CheckCompatible(request));
  } else {
    optimizer_ = opt;
    optimizer_proto_ = request.optimizer();
    seed_ = request.seed();
    sync_ = request.sync();
  }
  for (const proto::ParamSpec& spec : request.params()) {
    if (dense_.count(spec.name()) || sparse_.count(spec.name())) continue;
    PL_RETURN_IF_ERROR(AddParam(spec));
  }
  initialized_ = true;
  proto::InitResponse response;
  response.set_created(created);
  response.set_version(version());
  return response;
}

Status ParameterShard::AddParam(const proto::ParamSpec& spec) {
  PL_ASSIGN_OR_RETURN(InitSpec init, InitSpecFromProto(spec));
  const int slots = NumSlots(optimizer_.kind);
  if (spec.kind() == proto::ParamSpec::DENSE) {
    auto p = std::make_unique<DenseParam>();
    p->spec = spec;
    p->spec.set_block_size(BlockSizeOf(spec));
    p->init = init;
    p->numel = DenseNumel(spec);
    p->block_size = BlockSizeOf(spec);
    const uint64_t stream = DenseStreamSeed(seed_, spec.name());
    const int64_t nb = NumBlocks(p->numel, p->block_size);
    for (int64_t b = 0; b < nb; ++b) {
      if (ShardOfDenseBlock(spec.name(), b, num_shards_) != index_) continue;
      auto blk = std::make_unique<DenseBlockState>();
      blk->block = b;
      blk->offset = b * p->block_size;
      blk->n = std::min(p->numel, blk->offset + p->block_size) - blk->offset;
      blk->data.reset(new float[(1 + slots) * blk->n]);
      InitializeValues(init, stream, blk->data.get(), blk->n, blk->offset);
      InitSlots(optimizer_, blk->data.get() + blk->n, blk->n);
      dense_elements_ += blk->n;
      p->blocks.emplace(b, std::move(blk));
    }
    dense_.emplace(spec.name(), std::move(p));
  } else {
    auto t = std::make_unique<SparseTableState>();
    t->spec = spec;
    t->init = init;
    t->dim = spec.dim();
    t->stride = spec.dim() * (1 + slots) + 2;
    t->stripes.reset(new RowStripe[kRowStripes]);
    sparse_.emplace(spec.name(), std::move(t));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ lookups, checks


namespace {
Status BlockNotHere(const proto::ParamSpec& spec, int64_t numel, int64_t block_size, int64_t block,
                    int index, int num_shards) {
  const int64_t nb = NumBlocks(numel, block_size);
  if (block < 0 || block >= nb) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name(), "': block ", block,
                                                   " is outside [0, ", nb, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "parameter '", spec.name(), "': block ", block, " belongs to pserver ",
      ShardOfDenseBlock(spec.name(), block, num_shards), ", not to this pserver ", index));
}
}  // namespace

StatusOr<ParameterShard::DenseBlockState*> ParameterShard::FindBlock(const std::string& param,
                                                                     int64_t block) const {
  auto pit = dense_.find(param);
  if (pit == dense_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown dense parameter '", param, "'",
                                            sparse_.count(param) ? " (it is a sparse table)"
                                                                 : " (not initialised here)"));
  }
  const DenseParam& p = *pit->second;
  auto bit = p.blocks.find(block);
  if (bit == p.blocks.end()) return BlockNotHere(p.spec, p.numel, p.block_size, block, index_, num_shards_);
  return bit->second.get();
}

Status CheckRowIds(const proto::SparseRowsMsg& msg, const proto::ParamSpec& spec, int index,
                   int num_shards) {
  for (int i = 0; i < msg.ids_size(); ++i) {
    const int64_t id = msg.ids(i);
    if (id < 0 || (spec.num_rows() > 0 && id >= spec.num_rows())) {
      return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': row id ", id,
                                                     " (position ", i, ") is outside [0, ",
                                                     spec.num_rows() > 0 ? spec.num_rows() : INT64_MAX, ")"));
    }
    const int owner = ShardOfRow(id, num_shards);
    if (owner != index) {
      return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': row id ", id,
                                                     " belongs to pserver ", owner,
                                                     ", not to this pserver ", index));
    }
  }
  if (msg.dim() != 0 && msg.dim() != spec.dim()) {
    return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': message dim ", msg.dim(),
                                                   ", the table's dim is ", spec.dim()));
  }
  return absl::OkStatus();
}

Status ParameterShard::Resolve(const PushFrame& frame, ResolvedPush* out) const {
  const proto::PushRequest& request = frame.header();
  out->dense.reserve(frame.dense().size());
  std::vector<std::string> names;
  int64_t floats = 0;
  for (const DenseFramePayload& msg : frame.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlockState* blk, FindBlock(msg.param, msg.block));
    const std::string what = absl::StrCat("parameter '", msg.param, "' block ", msg.block);
    if (msg.values.num_bytes() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg.values.num_bytes(),
                                                     " bytes is not a whole number of float32 values"));
    }
    if (msg.values.size() != blk->n) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", blk->n,
                                                     " gradient values, got ", msg.values.size()));
    }
    out->dense.push_back({blk, &msg.values});
    floats += blk->n;
  }
  std::vector<int64_t> bad(out->dense.size(), -1);
  ParallelFor(
      static_cast<int64_t>(bad.size()), ThreadsForDense(floats),
      [&](int64_t i) { bad[i] = out->dense[i].grad->FirstNonFinite(); }, /*another_follows=*/true);
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i] < 0) continue;
    const DenseFramePayload& msg = frame.dense()[i];
    return absl::InvalidArgumentError(absl::StrCat("gradient of parameter '", msg.param, "' block ", msg.block,
                                                   " has a non-finite value (", msg.values.At(bad[i]),
                                                   ") at index ", out->dense[i].block->offset + bad[i]));
  }
  out->sparse.reserve(request.sparse_size());
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    auto it = sparse_.find(msg.table());
    if (it == sparse_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "unknown sparse table '", msg.table(), "'",
          dense_.count(msg.table()) ? " (it is a dense parameter)" : " (not initialised here)"));
    }
    SparseTableState* t = it->second.get();
    PL_RETURN_IF_ERROR(CheckRowIds(msg, t->spec, index_, num_shards_));
    const std::string what = absl::StrCat("table '", msg.table(), "'");
    PL_ASSIGN_OR_RETURN(FloatView grad, FloatView::Of(msg.values(), what));
    if (grad.size() != msg.ids_size() * t->dim) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg.ids_size(), " ids of dim ", t->dim,
                                                     " need ", msg.ids_size() * t->dim,
                                                     " gradient values, got ", grad.size()));
    }
    const int64_t bad = FirstNonFinite(grad.data(), grad.size());
    if (bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient of ", what, " has a non-finite value (", grad.data()[bad], ") at row id ",
          msg.ids(bad / t->dim), " element ", bad % t->dim, " (index ", bad, ")"));
    }
    out->rows += msg.ids_size();
    out->sparse.push_back({t, &msg, std::move(grad)});
  }
  return absl::OkStatus();
}

float* ParameterShard::FindOrCreateRow(SparseTableState* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold params_mu_ (shared) and stripe->mu
  auto it = stripe->index.find(id);
  if (it != stripe->index.end()) return stripe->At(it->second, t->stride);
  float* row = stripe->Insert(id, t->stride);
  InitializeValues(t->init, RowStreamSeed(seed_, t->spec.name(), id), row, t->dim);
  InitSlots(optimizer_, row + t->dim, t->dim);
  t->SetStep(row, 0);
  ++t->rows;
  return row;
}

// ---------------------------------------------------------------------------- Push

StatusOr<int64_t> ParameterShard::Push(const proto::PushRequest& request, absl::Time deadline) {
  return Push(PushFrame::FromProtoRef(request), deadline);
}

StatusOr<int64_t> ParameterShard::Push(const PushFrame& frame, absl::Time deadline) {
  return Push(frame, deadline, nullptr);
}

StatusOr<int64_t> ParameterShard::Push(const PushFrame& frame, absl::Time deadline,
                                       const DenseDestination& write_back) {
  const proto::PushRequest& request = frame.header();
  ResolvedPush push;
  {
    absl::ReaderMutexLock pl(&params_mu_);
    PL_RETURN_IF_ERROR(CheckInitialized());
    Status valid = Resolve(frame, &push);
    if (valid.ok() && write_back) {
      if (sync_) valid = absl::FailedPreconditionError("a push that writes back its result is for async mode only");
      for (size_t i = 0; valid.ok() && i < push.dense.size(); ++i) {
        StatusOr<float*> out = write_back(static_cast<int>(i), push.dense[i].block->n);
        if (out.ok()) push.dense[i].write_back = *out;
        valid = out.status();
      }
    }
    if (!valid.ok()) {
      ++pushes_rejected_;
      return valid;
    }
    if (!sync_) {
      absl::ReaderMutexLock sl(&step_mu_);
      ApplyAsync(push);
      ++pushes_applied_;
      sparse_rows_pushed_ += push.rows;
      absl::MutexLock l(&version_mu_);
      ++version_;
      version_cv_.SignalAll();
      return version_;
    }
  }
  // Sync. A push for a later step waits for it (the trainer is ahead of the others).
  // Blocks and tables are never removed, so `push` stays valid without the lock.
  if (request.step() > version()) PL_RETURN_IF_ERROR(WaitForVersion(request.step(), deadline));
  {
    absl::ReaderMutexLock pl(&params_mu_);
    absl::ReaderMutexLock sl(&step_mu_);
    const int64_t v = version();  // stable: it changes only under step_mu_ held exclusively
    if (request.step() < v) {
      ++pushes_rejected_;  // stale: its step finished without it
      return v;
    }
    {
      absl::MutexLock b(&barrier_mu_);
      if (!step_started_) {
        step_started_ = true;
        participants_ = live_;
      }
      // A retried push (same trainer, same step) is counted once.
      if (!pushed_.insert(request.trainer_id()).second) return v;
    }
    Accumulate(push);
    ++pushes_applied_;
    sparse_rows_pushed_ += push.rows;
  }
  MaybeCompleteStep();
  return version();
}


void ParameterShard::ApplyAsync(const ResolvedPush& push) {
  int64_t floats = 0;
  for (const ResolvedPush::Dense& d : push.dense) floats += d.block->n;
  ParallelFor(static_cast<int64_t>(push.dense.size()), ThreadsForDense(floats),
              [&](int64_t i) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // the caller holds params_mu_
                const ResolvedPush::Dense& d = push.dense[i];
                DenseBlockState* blk = d.block;
                absl::MutexLock l(&blk->mu);
                const int64_t step = ++blk->step;
                float* value = blk->data.get();
                float* slots = NumSlots(optimizer_.kind) > 0 ? value + blk->n : nullptr;
                d.grad->ForEachChunk([&](int64_t offset, const float* grad, int64_t n) {
                  ApplyUpdate(optimizer_, value + offset, grad, slots ? slots + offset : nullptr, n, step, blk->n);
                  // The gradient chunk is consumed: its place may take the new values.
                  if (d.write_back) std::memcpy(d.write_back + offset, value + offset, n * sizeof(float));
                });
              });
  for (const ResolvedPush::Sparse& s : push.sparse) {
    SparseTableState* t = s.table;
    for (int i = 0; i < s.msg->ids_size(); ++i) {
      const int64_t id = s.msg->ids(i);
      RowStripe& stripe = t->stripes[StripeOf(id)];
      absl::MutexLock l(&stripe.mu);
      float* row = FindOrCreateRow(t, &stripe, id);
      const int64_t step = t->GetStep(row) + 1;
      ApplyUpdate(optimizer_, row, s.grad.data() + i * t->dim, row + t->dim, t->dim, step);
      t->SetStep(row, step);
    }
  }
}

void ParameterShard::Accumulate(const ResolvedPush& push) {
  for (const ResolvedPush::Dense& d : push.dense) {
    DenseBlockState* blk = d.block;
    absl::MutexLock l(&blk->mu);
    if (!blk->accum) blk->accum.reset(new float[blk->n]);
    float* acc = blk->accum.get();
    if (!blk->has_accum) {
      d.grad->CopyTo(acc);
      blk->has_accum = true;
    } else {
      d.grad->ForEachChunk([acc](int64_t offset, const float* grad, int64_t n) {
        for (int64_t i = 0; i < n; ++i) acc[offset + i] += grad[i];
      });
    }
  }
  for (const ResolvedPush::Sparse& s : push.sparse) {
    SparseTableState* t = s.table;
    for (int i = 0; i < s.msg->ids_size(); ++i) {
      const int64_t id = s.msg->ids(i);
      const float* g = s.grad.data() + i * t->dim;
      RowStripe& stripe = t->stripes[StripeOf(id)];
      absl::MutexLock l(&stripe.mu);
      auto [it, inserted] = stripe.accum_index.try_emplace(id, static_cast<uint32_t>(stripe.accum.size()));
      if (inserted) {
        stripe.accum.insert(stripe.accum.end(), g, g + t->dim);
      } else {
        float* acc = stripe.accum.data() + it->second;
        for (int64_t j = 0; j < t->dim; ++j) acc[j] += g[j];
      }
    }
  }
}

void ParameterShard::SetLiveTrainers(const std::vector<int64_t>& trainer_ids) {
  {
    absl::MutexLock b(&barrier_mu_);
    live_ = absl::flat_hash_set<int64_t>(trainer_ids.begin(), trainer_ids.end());
    // A trainer that left the live set leaves the current step's barrier too.
    absl::erase_if(participants_, [&](int64_t id) { return !live_.contains(id); });
  }
  MaybeCompleteStep();
}

void ParameterShard::MaybeCompleteStep() {
  {
    absl::MutexLock b(&barrier_mu_);
    if (!step_started_ || completing_) return;
    for (int64_t id : participants_) {
      if (!pushed_.contains(id)) return;
    }
    completing_ = true;
  }
  absl::ReaderMutexLock pl(&params_mu_);
  absl::WriterMutexLock sl(&step_mu_);
  int contributors;
  {
    absl::MutexLock b(&barrier_mu_);
    contributors = static_cast<int>(pushed_.size());
  }
  ApplyStep(contributors);
  {
    absl::MutexLock b(&barrier_mu_);
    pushed_.clear();
    participants_.clear();
    step_started_ = false;
    completing_ = false;
  }
  SetVersion(version() + 1);
}

void ParameterShard::ApplyStep(int contributors) {
  const float scale = 1.0f / static_cast<float>(std::max(contributors, 1));
  for (auto& [name, p] : dense_) {
    for (auto& [b, blk] : p->blocks) {
      absl::MutexLock l(&blk->mu);
      if (!blk->has_accum) continue;
      float* g = blk->accum.get();
      for (int64_t i = 0; i < blk->n; ++i) g[i] *= scale;
      ApplyUpdate(optimizer_, blk->data.get(), g, blk->data.get() + blk->n, blk->n, ++blk->step);
      blk->has_accum = false;
    }
  }
  for (auto& [name, t] : sparse_) {
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock l(&stripe.mu);
      for (const auto& [id, pos] : stripe.accum_index) {
        float* g = stripe.accum.data() + pos;
        for (int64_t j = 0; j < t->dim; ++j) g[j] *= scale;
        float* row = FindOrCreateRow(t.get(), &stripe, id);
        const int64_t step = t->GetStep(row) + 1;
        ApplyUpdate(optimizer_, row, g, row + t->dim, t->dim, step);
        t->SetStep(row, step);
      }
      stripe.accum_index.clear();
      stripe.accum.clear();
    }
  }
}

}  // namespace pl::pserver
