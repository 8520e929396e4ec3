// ShardStore: configuration, Init, and the checks of pushes and pulls (shard_store.h).
#include "pserver/store/shard_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/dist/sharding.h"
#include "pserver/store/parallel_for.h"

namespace pl::pserver {

namespace {
// Serialized sizes, generously: a field's tag and length, the parameter's name, the block
// number, and the values in float32 (the widest the wire carries).
int64_t RequestBytesOfBlock(const proto::ParamSpec& spec, int64_t n) {
  return 32 + static_cast<int64_t>(spec.name().size()) + 4 * n;
}
// Ids are varints of at most 10 bytes.
int64_t RequestBytesOfRows(const proto::ParamSpec& spec, int64_t rows) {
  return 32 + static_cast<int64_t>(spec.name().size()) + rows * (10 + 4 * spec.dim());
}
}  // namespace

Status ShardStore::CheckInitialized() const {
  if (!initialized()) {
    // NOT_FOUND, as for any parameter this shard does not hold: a trainer answers it by
    // initialising the shard again (a pserver restarted without a checkpoint).
    return absl::NotFoundError(absl::StrCat("pserver shard ", index_, " holds no parameters: it is not initialised (call Init first)"));
  }
  return absl::OkStatus();
}

int64_t ShardStore::sparse_rows() const {
  absl::ReaderMutexLock l(&mu_);
  int64_t rows = 0;
  for (const auto& [name, t] : sparse_) rows += t->rows.load();
  return rows;
}

std::vector<proto::TableStats> ShardStore::Tables(int hottest) const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<proto::TableStats> out;
  for (const auto& [name, t] : sparse_) {
    proto::TableStats& s = out.emplace_back();
    s.set_name(name);
    s.set_rows(t->rows.load());
    s.set_admit_after(t->admit_after);
    s.set_admitted(t->admitted.load());
    s.set_evicted(t->evicted.load());
    s.set_evict_after_s(t->evict_after_s);
    if (t->optimizer) s.set_optimizer(t->optimizer->ToString());
    if (disk_ != nullptr) s.set_rows_on_disk(disk_->rows(name));
    int64_t bytes = 0;
    std::vector<HotRows::Entry> hot;
    for (int i = 0; i < kRowStripes; ++i) {
      RowStripe& stripe = t->stripes[i];
      absl::MutexLock sl(&stripe.mu);
      for (size_t slab = 0; slab < stripe.slabs.size(); ++slab) bytes += SlabRows(slab) * t->stride * sizeof(float);
      for (size_t slab = 0; slab < stripe.marked_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(uint32_t);
      for (size_t slab = 0; slab < stripe.touched_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(uint32_t);
      bytes += static_cast<int64_t>(stripe.free_slots.capacity() * sizeof(uint32_t) +
                                    stripe.evicted.capacity() * sizeof(int64_t));
      // A flat_hash_map slot holds the pair and one control byte.
      for (size_t slab = 0; slab < stripe.ids_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(int64_t);
      bytes += static_cast<int64_t>(stripe.index.capacity() * RowIndex::kEntryBytes);
      bytes += static_cast<int64_t>(stripe.changed.capacity() * sizeof(stripe.changed[0]));
      if (stripe.sightings) bytes += RowStripe::kSketchDepth * RowStripe::kSketchWidth * sizeof(uint16_t);
      stripe.hot.AppendTo(&hot);
    }
    s.set_bytes(bytes);
    std::sort(hot.begin(), hot.end(), [](const HotRows::Entry& a, const HotRows::Entry& b) {
      return a.count != b.count ? a.count > b.count : a.id < b.id;
    });
    for (size_t k = 0; k < hot.size() && static_cast<int>(k) < hottest; ++k) {
      proto::HotRow* h = s.add_hottest();
      h->set_id(hot[k].id);
      h->set_updates(hot[k].count);
      h->set_error(hot[k].error);
    }
  }
  return out;
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
    const proto::ParamSpec* held = nullptr;
    if (auto it = dense_.find(spec.name()); it != dense_.end()) held = &it->second->spec;
    if (auto it = sparse_.find(spec.name()); it != sparse_.end()) held = &it->second->spec;
    if (held == nullptr) continue;
    if (held->optimizer().SerializeAsString() != spec.optimizer().SerializeAsString()) {
      auto describe = [this](const proto::ParamSpec& s) {
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
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", spec.name(), "' appears twice in the Init request"));
    }
  }
  absl::WriterMutexLock l(&mu_);
  const bool created = !initialized();
  if (!created) {
    PL_RETURN_IF_ERROR(CheckCompatible(request));
  } else {
    optimizer_ = opt;
    rule_ = rule;
    optimizer_proto_ = request.optimizer();
    seed_ = request.seed();
    sync_ = request.sync();
  }
  for (const proto::ParamSpec& spec : request.params()) {
    if (dense_.count(spec.name()) || sparse_.count(spec.name())) continue;
    PL_RETURN_IF_ERROR(AddParam(spec));
  }
  initialized_.store(true, std::memory_order_release);
  return created;
}

Status ShardStore::AddParam(const proto::ParamSpec& spec, bool initialize_values) {
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
      auto blk = std::make_unique<DenseBlock>();
      blk->block = b;
      blk->offset = b * p->block_size;
      blk->n = std::min(p->numel, blk->offset + p->block_size) - blk->offset;
      blk->data.reset(new float[(1 + slots) * blk->n]);
      if (initialize_values) {
        InitializeValues(init, stream, blk->data.get(), blk->n, blk->offset);
        InitSlots(optimizer_, blk->data.get() + blk->n, blk->n);
      }
      dense_elements_ += blk->n;
      request_payload_bytes_ += RequestBytesOfBlock(spec, blk->n);
      p->blocks.emplace(b, std::move(blk));
    }
    dense_.emplace(spec.name(), std::move(p));
  } else {
    auto t = std::make_unique<SparseTable>();
    t->spec = spec;
    t->init = init;
    t->dim = spec.dim();
    int table_slots = slots;
    if (spec.has_optimizer()) {
      PL_ASSIGN_OR_RETURN(OptimizerSpec own, OptimizerFromProto(spec.optimizer()));
      PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(own));
      table_slots = NumSlots(own.kind);
      t->optimizer = own;
      t->rule = rule;
    }
    t->stride = spec.dim() * (1 + table_slots) + 2;
    t->admit_after = spec.admit_after();
    t->evict_after_s = spec.evict_after_s();
    if (t->evict_after_s > 0) evicting_.store(true, std::memory_order_relaxed);
    t->stripes.reset(new RowStripe[kRowStripes]);
    sparse_.emplace(spec.name(), std::move(t));
    // Rows this shard can hold: its share of the id range, when the table has one.
    const int64_t rows = spec.num_rows() > 0 ? std::min(kRowsPerPushBound, (spec.num_rows() + num_shards_ - 1) / num_shards_)
                                             : kRowsPerPushBound;
    request_payload_bytes_ += RequestBytesOfRows(spec, rows);
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

// OK when every id of `msg` is in the table's range and owned by pserver `index` of
// `num_shards`, and its dim (if set) is the table's; else INVALID_ARGUMENT naming it.
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
}  // namespace

StatusOr<DenseBlock*> ShardStore::FindBlock(const std::string& param, int64_t block) const {
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

StatusOr<SparseTable*> ShardStore::FindRows(const proto::SparseRowsMsg& msg, bool explain) const {
  auto it = sparse_.find(msg.table());
  if (it == sparse_.end()) {
    const char* why = !explain ? ""
                      : dense_.count(msg.table()) ? " (it is a dense parameter)"
                                                  : " (not initialised here)";
    return absl::NotFoundError(absl::StrCat("unknown sparse table '", msg.table(), "'", why));
  }
  PL_RETURN_IF_ERROR(CheckRowIds(msg, it->second->spec, index_, num_shards_));
  return it->second.get();
}

Status ShardStore::Resolve(const PushFrame& frame, ResolvedPush* out, bool check_finite) const {
  absl::ReaderMutexLock l(&mu_);
  const proto::PushRequest& request = frame.header();
  out->dense.reserve(frame.dense().size());
  int64_t floats = 0;
  for (const DenseFramePayload& msg : frame.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlock * blk, FindBlock(msg.param, msg.block));
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
  if (check_finite) {
    ParallelFor(
        static_cast<int64_t>(bad.size()), ThreadsForDense(floats),
        [&](int64_t i) { bad[i] = out->dense[i].grad->FirstNonFinite(); }, /*another_follows=*/true);
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i] < 0) continue;
    const DenseFramePayload& msg = frame.dense()[i];
    return absl::InvalidArgumentError(absl::StrCat("gradient of parameter '", msg.param, "' block ", msg.block,
                                                   " has a non-finite value (", msg.values.At(bad[i]),
                                                   ") at index ", out->dense[i].block->offset + bad[i]));
  }
  out->sparse.reserve(request.sparse_size());
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    PL_ASSIGN_OR_RETURN(SparseTable * t, FindRows(msg, /*explain=*/true));
    const std::string what = absl::StrCat("table '", msg.table(), "'");
    PL_ASSIGN_OR_RETURN(FloatView grad, FloatView::Of(msg.values(), what));
    if (grad.size() != msg.ids_size() * t->dim) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg.ids_size(), " ids of dim ", t->dim,
                                                     " need ", msg.ids_size() * t->dim,
                                                     " gradient values, got ", grad.size()));
    }
    const int64_t bad_at = check_finite ? FirstNonFinite(grad.data(), grad.size()) : -1;
    if (bad_at >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient of ", what, " has a non-finite value (", grad.data()[bad_at], ") at row id ",
          msg.ids(bad_at / t->dim), " element ", bad_at % t->dim, " (index ", bad_at, ")"));
    }
    out->rows += msg.ids_size();
    out->sparse.push_back({t, &msg, std::move(grad)});
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------- Read

Status ShardStore::Read(const proto::PullRequest& request, PullFrame* frame, const DenseDestination& dense_out) {
  absl::ReaderMutexLock l(&mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  // Validate the whole request first: a bad one creates no rows.
  std::vector<DenseBlock*> blocks;
  blocks.reserve(request.dense_size());
  for (const proto::DenseBlock& msg : request.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlock * blk, FindBlock(msg.param(), msg.block()));
    blocks.push_back(blk);
  }
  std::vector<float*> destinations;
  if (dense_out) {
    for (int i = 0; i < request.dense_size(); ++i) {
      PL_ASSIGN_OR_RETURN(float* out, dense_out(i, blocks[i]->n));
      destinations.push_back(out);
    }
  }
  std::vector<SparseTable*> tables;
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    PL_ASSIGN_OR_RETURN(SparseTable * t, FindRows(msg, /*explain=*/false));
    tables.push_back(t);
  }
  for (int i = 0; i < request.dense_size(); ++i) {
    DenseBlock* blk = blocks[i];
    if (!sync_) {
      // Async: read without the block lock. A push applied meanwhile may show in part
      // of the block; each value is either before or after it (float stores do not
      // tear), the staleness async training already accepts. In a frame, the values
      // are sent in place.
      if (destinations.empty() && request.bf16()) {
        frame->AddDenseBf16(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n);
      } else if (destinations.empty()) {
        frame->AddDenseRef(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n, blk->data);
      } else {
        std::memcpy(destinations[i], blk->data.get(), blk->n * sizeof(float));
      }
      continue;
    }
    // Sync: exactly the values of the finished step.
    if (destinations.empty() && request.bf16()) {
      absl::MutexLock bl(&blk->mu);
      frame->AddDenseBf16(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n);
      continue;
    }
    float* out = destinations.empty()
                     ? frame->AddDenseBuffer(request.dense(i).param(), request.dense(i).block(), blk->n)
                     : destinations[i];
    absl::MutexLock bl(&blk->mu);
    std::memcpy(out, blk->data.get(), blk->n * sizeof(float));
  }
  proto::PullResponse* response = &frame->header();
  const RowNotes notes = Notes();
  for (int i = 0; i < request.sparse_size(); ++i) {
    const proto::SparseRowsMsg& msg = request.sparse(i);
    SparseTable* t = tables[i];
    proto::SparseRowsMsg* out = response->add_sparse();
    out->set_table(msg.table());
    out->set_dim(t->dim);
    *out->mutable_ids() = msg.ids();
    std::string* values = out->mutable_values();
    values->resize(static_cast<size_t>(msg.ids_size()) * t->dim * sizeof(float));
    char* const base = values->data();
    const size_t row_bytes = t->dim * sizeof(float);
    const RowsByStripe rows(msg);
    ParallelFor(kRowStripes, ThreadsForRows(msg.ids_size()), [&](int64_t st) {
      if (rows.begin[st] == rows.begin[st + 1]) return;
      RowStripe& stripe = t->stripes[st];
      absl::MutexLock sl(&stripe.mu);
      for (uint32_t k = rows.begin[st]; k < rows.begin[st + 1]; ++k) {
        const uint32_t i = rows.order[k];
        char* dst = base + i * row_bytes;
        std::optional<uint32_t> slot = FindSlot(t, &stripe, msg.ids(i));
        if (!slot && t->admit_after > 1) {
          std::memset(dst, 0, row_bytes);  // not admitted yet: the shared default
          continue;
        }
        if (!slot) slot = CreateSlot(t, &stripe, msg.ids(i));
        if (notes.touch) stripe.Touch(*slot, notes.tick);
        std::memcpy(dst, stripe.At(*slot, t->stride), row_bytes);
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace pl::pserver
