// SparseStore's disk tier: rows the cap spills, taken back when touched (sparse_store.h,
// disk_tier.h).
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

Status SparseStore::LoadedRow(const std::string& table, int64_t id) {
  const int64_t cap = memory_cap_bytes();
  if (disk_ == nullptr || cap <= 0) return absl::OkStatus();
  absl::ReaderMutexLock l(&mu_);
  if (BytesLocked() <= static_cast<int64_t>(kLowWater * static_cast<double>(cap))) return absl::OkStatus();
  auto tit = tables_.find(table);
  if (tit == tables_.end()) return absl::OkStatus();
  SparseTable* t = tit->second.get();
  absl::ReaderMutexLock tier(&tier_mu_);
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  return SpillRow(t, &stripe, id);
}

}  // namespace pl::pserver
