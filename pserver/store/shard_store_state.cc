// ShardStore's whole state for a saver (Visit) and from a restorer (Load); the byte
// format is shard_serializer's.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pserver/store/shard_store.h"

namespace pl::pserver {

std::vector<ShardStore::DensePin> ShardStore::PinDense() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<DensePin> pins;
  if (!initialized_) return pins;
  const int slots = NumSlots(optimizer_.kind);
  for (const auto& [name, p] : dense_) {
    for (const auto& [b, blk] : p->blocks) {
      absl::MutexLock bl(&blk->mu);
      ++blk->pins;
      pins.push_back({blk.get(), blk->data, static_cast<size_t>((1 + slots) * blk->n) * sizeof(float)});
    }
  }
  return pins;
}

void ShardStore::Unpin(const DensePin& pin) {
  absl::MutexLock bl(&pin.block->mu);
  // An update since has given the block a copy of its own, with no pins.
  if (pin.block->data.get() == pin.data.get() && pin.block->pins > 0) --pin.block->pins;
}

Status ShardStore::Visit(Visitor* v, Rows rows) const {
  absl::ReaderMutexLock l(&mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  // No row moves between memory and the disk tier during the visit: each is seen once.
  std::optional<absl::MutexLock> tier;
  if (disk_ != nullptr) tier.emplace(&tier_mu_);
  const int slots = NumSlots(optimizer_.kind);
  PL_RETURN_IF_ERROR(v->Config(optimizer_proto_, seed_, sync_, dense_.size()));
  for (const auto& [name, p] : dense_) {
    PL_RETURN_IF_ERROR(v->Param(p->spec, p->blocks.size()));
    for (const auto& [b, blk] : p->blocks) {
      absl::MutexLock bl(&blk->mu);
      PL_RETURN_IF_ERROR(v->Block(b, blk->n, blk->step, {blk->data.get(), static_cast<size_t>((1 + slots) * blk->n)}));
    }
  }
  PL_RETURN_IF_ERROR(v->Tables(sparse_.size()));
  for (const auto& [name, t] : sparse_) {
    PL_RETURN_IF_ERROR(v->Table(t->spec, kRowStripes));
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock sl(&stripe.mu);
      if (rows == Rows::kChangedTakingChanges) {
        PL_RETURN_IF_ERROR(v->Evicted(stripe.evicted));
        // A row keeps its slot until evicted; after an eviction, an entry whose row is
        // gone or moved (its slot reused) is stale.
        std::vector<std::pair<int64_t, uint32_t>> live;
        const std::vector<std::pair<int64_t, uint32_t>>* changed = &stripe.changed;
        if (stripe.evicted_since_take) {
          for (const auto& [id, slot] : stripe.changed) {
            if (stripe.index.Find(id) == slot) live.emplace_back(id, slot);
          }
          changed = &live;
        }
        PL_RETURN_IF_ERROR(v->Stripe(changed->size()));
        for (const auto& [id, slot] : *changed) {
          PL_RETURN_IF_ERROR(v->Row(id, {stripe.At(slot, t->stride), static_cast<size_t>(t->stride)}));
        }
      } else {
        // The rows on the disk tier travel in the last stripe's section (a reader puts a
        // row in its own stripe, whichever section it came in).
        const bool last = s == kRowStripes - 1;
        const int64_t on_disk = last && disk_ != nullptr ? disk_->rows(name) : 0;
        PL_RETURN_IF_ERROR(v->Stripe(stripe.index.size() + on_disk));
        for (const auto& [id, slot] : stripe.index) {
          PL_RETURN_IF_ERROR(v->Row(id, {stripe.At(slot, t->stride), static_cast<size_t>(t->stride)}));
        }
        if (on_disk > 0) {
          int64_t seen = 0;
          PL_RETURN_IF_ERROR(disk_->ForEach(name, t->stride, [&](int64_t id, absl::Span<const float> record) {
            ++seen;
            return v->Row(id, record);
          }));
          if (seen != on_disk) {
            return absl::InternalError(absl::StrCat("disk tier: table '", name, "' holds ", seen, " rows, counted ", on_disk));
          }
        }
      }
      if (rows != Rows::kAll) stripe.TakeChanges();
      if (t->admit_after > 1) {
        static const uint16_t kNone[RowStripe::kSketchDepth * RowStripe::kSketchWidth] = {};
        PL_RETURN_IF_ERROR(v->Sightings({stripe.sightings ? stripe.sightings.get() : kNone,
                                         RowStripe::kSketchDepth * RowStripe::kSketchWidth}));
      }
    }
  }
  return absl::OkStatus();
}

Status ShardStore::Load(const std::function<Status(Loader*)>& fill) {
  absl::WriterMutexLock l(&mu_);
  if (initialized()) {
    return absl::FailedPreconditionError("LoadState needs a fresh shard; this one is initialised");
  }
  Status s;
  {
    Loader loader(this);
    s = fill(&loader);
  }
  if (!s.ok()) {
    // Nothing half-read stays behind (blocks the fill never reached hold no values):
    // a later Load or Init starts from an empty store.
    dense_.clear();
    sparse_.clear();
    dense_elements_ = 0;
    request_payload_bytes_ = 0;
    evicting_ = false;
    return s;
  }
  initialized_.store(true, std::memory_order_release);
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
  return absl::OkStatus();
}

bool ShardStore::Loader::Holds(const std::string& name) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return store_->dense_.count(name) > 0 || store_->sparse_.count(name) > 0;
}

StatusOr<size_t> ShardStore::Loader::Add(const proto::ParamSpec& spec) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // The state read next fills every block this shard owns (ReadDense refuses fewer),
  // and a fill that fails leaves an empty store: no block is read unset.
  PL_RETURN_IF_ERROR(store_->AddParam(spec, /*initialize_values=*/false));
  auto it = store_->dense_.find(spec.name());
  if (it == store_->dense_.end()) return 0;
  const int slots = NumSlots(store_->optimizer_.kind);
  for (const auto& [b, blk] : it->second->blocks) {
    const size_t bytes = static_cast<size_t>((1 + slots) * blk->n) * sizeof(float);
    if (bytes < PageWarmer::kMinBytes) continue;
    if (!warmer_) warmer_ = std::make_unique<PageWarmer>();
    warmer_->Add(blk->data.get(), bytes);
  }
  return it->second->blocks.size();
}

absl::Span<float> ShardStore::Loader::Block(const std::string& name, int64_t b, int64_t n, int64_t step)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto pit = store_->dense_.find(name);
  if (pit == store_->dense_.end()) return {};
  auto it = pit->second->blocks.find(b);
  if (it == pit->second->blocks.end() || it->second->n != n || step < 0) return {};
  DenseBlock* blk = it->second.get();
  absl::MutexLock bl(&blk->mu);
  blk->step = step;
  return {blk->data.get(), static_cast<size_t>((1 + NumSlots(store_->optimizer_.kind)) * n)};
}

absl::Span<float> ShardStore::Loader::Row(const std::string& table, int64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto tit = store_->sparse_.find(table);
  if (tit == store_->sparse_.end()) return {};
  SparseTable* t = tit->second.get();
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  if (std::optional<uint32_t> slot = stripe.index.Find(id)) return {stripe.At(*slot, t->stride), static_cast<size_t>(t->stride)};
  ++t->rows;
  return {stripe.Insert(id, t->stride), static_cast<size_t>(t->stride)};
}

void ShardStore::Loader::Erase(const std::string& table, int64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto tit = store_->sparse_.find(table);
  if (tit == store_->sparse_.end()) return;
  SparseTable* t = tit->second.get();
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  // Not counted as evicted here: a restore replays evictions the shard counted before.
  if (stripe.Erase(id, store_->tracking_changes())) --t->rows;
}

absl::Span<uint16_t> ShardStore::Loader::Sightings(const std::string& table, int s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto tit = store_->sparse_.find(table);
  if (tit == store_->sparse_.end() || s < 0 || s >= kRowStripes) return {};
  RowStripe& stripe = tit->second->stripes[s];
  absl::MutexLock sl(&stripe.mu);
  if (!stripe.sightings) stripe.sightings.reset(new uint16_t[RowStripe::kSketchDepth * RowStripe::kSketchWidth]());
  stripe.sightings_sum = -1;  // summed again at the next sighting
  return {stripe.sightings.get(), RowStripe::kSketchDepth * RowStripe::kSketchWidth};
}

const proto::ParamSpec* ShardStore::Loader::Spec(const std::string& name) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (auto it = store_->dense_.find(name); it != store_->dense_.end()) return &it->second->spec;
  if (auto it = store_->sparse_.find(name); it != store_->sparse_.end()) return &it->second->spec;
  return nullptr;
}

size_t ShardStore::Loader::OwnedBlocks(const std::string& name) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto it = store_->dense_.find(name);
  return it == store_->dense_.end() ? 0 : it->second->blocks.size();
}

absl::Span<float> ShardStore::Loader::NewRow(const std::string& table, int64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto tit = store_->sparse_.find(table);
  if (tit == store_->sparse_.end()) return {};
  SparseTable* t = tit->second.get();
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  if (stripe.index.contains(id)) return {};
  ++t->rows;
  return {stripe.Insert(id, t->stride), static_cast<size_t>(t->stride)};
}

}  // namespace pl::pserver
