// SparseStore's disk tier (rows the cap spills, taken back when touched; disk_tier.h),
// and what eviction works with (row_eviction.h).
#include <optional>
#include <vector>

#include "pserver/store/sparse_store.h"

namespace pl::pserver {


void SparseStore::AttachDiskTier(std::unique_ptr<DiskTier> tier) { disk_ = std::move(tier); }

std::optional<uint32_t> SparseStore::TakeFromDisk(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ (shared) and stripe->mu
  if (disk_ == nullptr) return std::nullopt;
  // tier_mu_ comes before a stripe's lock: let go of the stripe to take it.
  stripe->mu.Unlock();
  absl::ReaderMutexLock tier(&tier_mu_);
  stripe->mu.Lock();
  if (std::optional<uint32_t> slot = stripe->index.Find(id)) return slot;  // it came meanwhile
  thread_local std::vector<float> record;
  record.resize(static_cast<size_t>(t->stride));
  StatusOr<bool> took = disk_->Take(t->spec.name(), id, absl::MakeSpan(record));
  if (!took.ok()) DiskTier::StopOnFailure(took.status());
  if (!*took) return std::nullopt;
  float* row = stripe->Insert(id, t->stride);
  std::copy(record.begin(), record.end(), row);
  ++t->rows;
  return stripe->index.Find(id);
}

Status SparseStore::SpillRow(SparseTable* t, RowStripe* stripe, int64_t id) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const std::optional<uint32_t> slot = stripe->index.Find(id);
  if (!slot) return absl::OkStatus();
  PL_RETURN_IF_ERROR(disk_->Put(t->spec.name(), id, {stripe->At(*slot, t->stride), static_cast<size_t>(t->stride)}));
  stripe->Erase(id, /*track=*/false);  // not gone: the row lives on, on disk
  --t->rows;
  ++t->spilled;
  return absl::OkStatus();
}

void SparseStore::InStripe(SparseTable* t, int s, bool tier, const std::function<void(RowStripe&)>& fn) const {
  // tier_mu_ comes before a stripe's lock.
  std::optional<absl::ReaderMutexLock> tier_lock;
  if (tier && disk_ != nullptr) tier_lock.emplace(&tier_mu_);
  RowStripe& stripe = t->stripes[s];
  absl::MutexLock sl(&stripe.mu);
  fn(stripe);
}

Status SparseStore::EvictLocked(SparseTable* t, RowStripe* stripe, int64_t id, bool to_disk) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // inside InStripe
  if (to_disk) return SpillRow(t, stripe, id);
  if (stripe->Erase(id, tracking_changes())) {
    --t->rows;
    ++t->evicted;
  }
  return absl::OkStatus();
}

std::vector<std::string> SparseStore::TableNames() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, t] : tables_) names.push_back(name);
  return names;
}

std::vector<std::pair<std::string, SparseTable*>> SparseStore::TablesNow() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<std::pair<std::string, SparseTable*>> out;
  for (const auto& [name, t] : tables_) out.emplace_back(name, t.get());
  return out;
}

SparseTable* SparseStore::Table(const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

}  // namespace pl::pserver
