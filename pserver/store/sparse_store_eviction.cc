// SparseStore's eviction: what the memory cap counts, which rows a sweep takes, and
// evicting them (sparse_store.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "pserver/store/sparse_store.h"

namespace pl::pserver {

namespace {
// A row's id beside its record, and its entry in the index (a slot and a control byte,
// row_index.h) at the set's usual load.
constexpr int64_t kIndexBytesPerRow = 8 + 8;

int64_t CountedSteps(const SparseTable& t, const float* record) {
  return std::min(t.GetStep(record), SparseStore::kMaxCountedSteps);
}

template <typename K>
std::vector<std::pair<K, int64_t>> Sorted(const absl::flat_hash_map<K, int64_t>& histogram) {
  std::vector<std::pair<K, int64_t>> out(histogram.begin(), histogram.end());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

void SparseStore::ForEachRow(const std::function<void(const SparseTable&, int64_t, uint32_t)>& fn) const {
  for (const auto& [name, t] : tables_) {
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock sl(&stripe.mu);
      for (const auto& [id, slot] : stripe.index) fn(*t, CountedSteps(*t, stripe.At(slot, t->stride)), stripe.TouchedAt(slot));
    }
  }
}

void SparseStore::EnableEviction(int64_t cap_bytes) {
  cap_bytes_.store(std::max<int64_t>(cap_bytes, 0), std::memory_order_relaxed);
  evicting_.store(true, std::memory_order_relaxed);
}

int64_t SparseStore::RowCost(const SparseTable& t) {
  // The record, the tick it was touched at, its change mark.
  return t.stride * static_cast<int64_t>(sizeof(float)) + 2 * static_cast<int64_t>(sizeof(uint32_t)) +
         kIndexBytesPerRow;
}

int64_t SparseStore::bytes() const {
  absl::ReaderMutexLock l(&mu_);
  return BytesLocked();
}

int64_t SparseStore::BytesLocked() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : tables_) bytes += t->rows.load(std::memory_order_relaxed) * RowCost(*t);
  return bytes;
}

std::vector<std::string> SparseStore::TableNames() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, t] : tables_) names.push_back(name);
  return names;
}

SparseStore::SweepPlan SparseStore::PlanSweep(bool ttl_due) const {
  SweepPlan plan;
  if (!evicting()) return plan;
  const uint32_t now = tick();
  absl::ReaderMutexLock l(&mu_);
  if (ttl_due) {
    const int64_t ticks_per_s = absl::Seconds(1) / kEvictionTick;
    for (const auto& [name, t] : tables_) {
      if (t->evict_after_s <= 0) continue;
      const int64_t before = static_cast<int64_t>(now) - t->evict_after_s * ticks_per_s;
      if (before > 0) plan.expired_before[name] = static_cast<uint32_t>(before);
    }
  }
  const int64_t cap = memory_cap_bytes();
  if (cap <= 0) return plan;
  const int64_t bytes = BytesLocked();
  if (bytes <= static_cast<int64_t>(kHighWater * static_cast<double>(cap))) return plan;
  // Over the cap: the bytes of the rows by their update count, fewest first, give the
  // count below which every row goes; the rows of that count by the tick they were last
  // touched at, oldest first, give how many of them go too.
  plan.cap = true;
  const int64_t excess = bytes - static_cast<int64_t>(kLowWater * static_cast<double>(cap));
  int64_t left = excess;
  {
    absl::flat_hash_map<int64_t, int64_t> by_steps;
    ForEachRow([&](const SparseTable& t, int64_t steps, uint32_t) { by_steps[steps] += RowCost(t); });
    plan.cap_steps = kMaxCountedSteps + 1;  // none found: every row goes
    for (const auto& [steps, b] : Sorted(by_steps)) {
      if (b >= left) {
        plan.cap_steps = steps;
        break;
      }
      left -= b;
    }
  }
  absl::flat_hash_map<uint32_t, int64_t> by_tick;
  ForEachRow([&](const SparseTable& t, int64_t steps, uint32_t at) {
    if (steps == plan.cap_steps) by_tick[at] += RowCost(t);
  });
  plan.cap_before = UINT32_MAX;
  for (const auto& [at, b] : Sorted(by_tick)) {
    if (b >= left) {
      plan.cap_before = at;
      plan.cap_bytes_at = left;
      break;
    }
    left -= b;
  }
  return plan;
}

SparseStore::Victims SparseStore::SweepStripe(const std::string& table, int s, SweepPlan* plan, bool erase) {
  Victims victims;
  absl::ReaderMutexLock l(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end() || s < 0 || s >= kRowStripes) return victims;
  SparseTable* t = it->second.get();
  const int64_t cost = RowCost(*t);
  auto expiry = plan->expired_before.find(table);
  const uint32_t expired_before = expiry == plan->expired_before.end() ? 0 : expiry->second;
  // A spill moves rows to the tier: tier_mu_ before the stripe's lock (shard_store.h).
  std::optional<absl::ReaderMutexLock> tier;
  if (disk_ != nullptr && erase) tier.emplace(&tier_mu_);
  RowStripe& stripe = t->stripes[s];
  absl::MutexLock sl(&stripe.mu);
  for (const auto& [id, slot] : stripe.index) {
    const uint32_t at = stripe.TouchedAt(slot);
    if (at < expired_before) {
      victims.expired.push_back(id);
      continue;
    }
    if (!plan->cap) continue;
    const int64_t steps = CountedSteps(*t, stripe.At(slot, t->stride));
    bool evict = steps < plan->cap_steps || (steps == plan->cap_steps && at < plan->cap_before);
    if (!evict && steps == plan->cap_steps && at == plan->cap_before && plan->cap_bytes_at > 0) {
      plan->cap_bytes_at -= cost;
      evict = true;
    }
    if (evict) victims.over_cap.push_back(id);
  }
  if (erase) {
    const bool track = tracking_changes();
    for (int64_t id : victims.expired) stripe.Erase(id, track);
    t->rows -= static_cast<int64_t>(victims.expired.size());
    t->evicted += static_cast<int64_t>(victims.expired.size());
    if (disk_ == nullptr) {
      for (int64_t id : victims.over_cap) stripe.Erase(id, track);
      t->rows -= static_cast<int64_t>(victims.over_cap.size());
      t->evicted += static_cast<int64_t>(victims.over_cap.size());
    } else {
      for (int64_t id : victims.over_cap) {
        if (Status spilled = SpillRow(t, &stripe, id); !spilled.ok()) DiskTier::StopOnFailure(spilled);
      }
    }
  }
  return victims;
}

StatusOr<int64_t> SparseStore::Evict(const std::string& table, absl::Span<const int64_t> ids, bool to_disk) {
  if (to_disk && disk_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pserver ", index_, ": asked to move rows of table '", table,
        "' to the disk tier, and it has none (its primary runs with --sparse_disk_dir; this replica must too)"));
  }
  absl::ReaderMutexLock l(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) return 0;
  SparseTable* t = it->second.get();
  std::optional<absl::ReaderMutexLock> tier;
  if (to_disk) tier.emplace(&tier_mu_);
  const bool track = tracking_changes();
  int64_t erased = 0;
  for (int64_t id : ids) {
    RowStripe& stripe = t->stripes[StripeOf(id)];
    absl::MutexLock sl(&stripe.mu);
    if (!stripe.index.contains(id)) continue;
    ++erased;
    if (to_disk) {
      PL_RETURN_IF_ERROR(SpillRow(t, &stripe, id));
    } else {
      stripe.Erase(id, track);
      --t->rows;
      ++t->evicted;
    }
  }
  return erased;
}

}  // namespace pl::pserver
