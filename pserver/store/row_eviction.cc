// RowEviction: what the memory cap counts, which rows a sweep takes, and evicting them
// (row_eviction.h).
#include "pserver/store/row_eviction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace pl::pserver {

namespace {
// A row's id beside its record, and its entry in the index (a slot and a control byte,
// row_index.h) at the set's usual load.
constexpr int64_t kIndexBytesPerRow = 8 + 8;

int64_t CountedSteps(const SparseTable& t, const float* record) {
  return std::min(t.GetStep(record), RowEviction::kMaxCountedSteps);
}

template <typename K>
std::vector<std::pair<K, int64_t>> Sorted(const absl::flat_hash_map<K, int64_t>& histogram) {
  std::vector<std::pair<K, int64_t>> out(histogram.begin(), histogram.end());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

void RowEviction::ForEachRow(const std::function<void(const SparseTable&, int64_t, uint32_t)>& fn) const {
  for (const auto& [name, t] : tables_->TablesNow()) {
    for (int s = 0; s < kRowStripes; ++s) {
      tables_->InStripe(t, s, /*tier=*/false, [&](RowStripe& stripe) {
        for (const auto& [id, slot] : stripe.index) fn(*t, CountedSteps(*t, stripe.At(slot, t->stride)), stripe.TouchedAt(slot));
      });
    }
  }
}

void RowEviction::Enable(int64_t cap_bytes) {
  cap_bytes_.store(std::max<int64_t>(cap_bytes, 0), std::memory_order_relaxed);
  tables_->NoteTouches();
}

int64_t RowEviction::RowCost(const SparseTable& t) {
  // The record, the tick it was touched at, its change mark.
  return t.stride * static_cast<int64_t>(sizeof(float)) + 2 * static_cast<int64_t>(sizeof(uint32_t)) +
         kIndexBytesPerRow;
}

int64_t RowEviction::bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : tables_->TablesNow()) bytes += t->rows.load(std::memory_order_relaxed) * RowCost(*t);
  return bytes;
}

RowEviction::SweepPlan RowEviction::Plan(bool ttl_due) const {
  SweepPlan plan;
  if (!tables_->evicting()) return plan;
  const uint32_t now = tables_->tick();
  const std::vector<std::pair<std::string, SparseTable*>> tables = tables_->TablesNow();
  if (ttl_due) {
    const int64_t ticks_per_s = absl::Seconds(1) / SparseStore::kEvictionTick;
    for (const auto& [name, t] : tables) {
      if (t->evict_after_s <= 0) continue;
      const int64_t before = static_cast<int64_t>(now) - t->evict_after_s * ticks_per_s;
      if (before > 0) plan.expired_before[name] = static_cast<uint32_t>(before);
    }
  }
  const int64_t cap = cap_bytes();
  if (cap <= 0) return plan;
  const int64_t bytes = this->bytes();
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

RowEviction::Victims RowEviction::SweepStripe(const std::string& table, int s, SweepPlan* plan, bool erase) {
  Victims victims;
  SparseTable* t = tables_->Table(table);
  if (t == nullptr || s < 0 || s >= kRowStripes) return victims;
  const int64_t cost = RowCost(*t);
  auto expiry = plan->expired_before.find(table);
  const uint32_t expired_before = expiry == plan->expired_before.end() ? 0 : expiry->second;
  const bool to_disk = tables_->has_disk_tier();
  // Decided and, with `erase`, evicted under the same stripe lock (and the tier's, for
  // a spill).
  tables_->InStripe(t, s, /*tier=*/to_disk && erase, [&](RowStripe& stripe) {
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
    if (!erase) return;
    for (int64_t id : victims.expired) (void)tables_->EvictLocked(t, &stripe, id, /*to_disk=*/false);
    for (int64_t id : victims.over_cap) {
      if (Status gone = tables_->EvictLocked(t, &stripe, id, to_disk); !gone.ok()) DiskTier::StopOnFailure(gone);
    }
  });
  return victims;
}

StatusOr<int64_t> RowEviction::Evict(const std::string& table, absl::Span<const int64_t> ids, bool to_disk) {
  if (to_disk && !tables_->has_disk_tier()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pserver ", tables_->index(), ": asked to move rows of table '", table,
        "' to the disk tier, and it has none (its primary runs with --sparse_disk_dir; this replica must too)"));
  }
  SparseTable* t = tables_->Table(table);
  if (t == nullptr) return 0;
  int64_t erased = 0;
  Status failed;
  for (int64_t id : ids) {
    tables_->InStripe(t, StripeOf(id), to_disk, [&](RowStripe& stripe) {
      if (!failed.ok() || !stripe.index.contains(id)) return;
      ++erased;
      failed = tables_->EvictLocked(t, &stripe, id, to_disk);
    });
    PL_RETURN_IF_ERROR(failed);
  }
  return erased;
}

Status RowEviction::AfterRestore(const std::string& table, int64_t id) {
  const int64_t cap = cap_bytes();
  if (!tables_->has_disk_tier() || cap <= 0) return absl::OkStatus();
  if (bytes() <= static_cast<int64_t>(kLowWater * static_cast<double>(cap))) return absl::OkStatus();
  SparseTable* t = tables_->Table(table);
  if (t == nullptr) return absl::OkStatus();
  Status spilled;
  tables_->InStripe(t, StripeOf(id), /*tier=*/true,
                    [&](RowStripe& stripe) { spilled = tables_->EvictLocked(t, &stripe, id, /*to_disk=*/true); });
  return spilled;
}

}  // namespace pl::pserver
