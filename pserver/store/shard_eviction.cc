// ParameterShard's eviction sweep, alone or as a replicated primary, and a backup's
// application of the primary's evictions (shard.h).
#include <utility>

#include "pserver/store/shard.h"

namespace pl::pserver {

int64_t ParameterShard::SweepRows(bool ttl_due) {
  if (!store_.initialized() || !store_.tables().evicting()) return 0;
  RowEviction::SweepPlan plan = store_.eviction().Plan(ttl_due);
  if (plan.empty()) return 0;
  int64_t evicted = 0;
  const bool to_disk = store_.tables().has_disk_tier();
  for (const std::string& table : store_.tables().TableNames()) {
    for (int s = 0; s < kRowStripes; ++s) {
      if (hook_ == nullptr) {
        RowEviction::Victims v = store_.eviction().SweepStripe(table, s, &plan, /*erase=*/true);
        evicted += static_cast<int64_t>(v.expired.size() + v.over_cap.size());
        continue;
      }
      // Under the order lock no push is applied meanwhile, so the stream holds the
      // eviction exactly where this replica makes it.
      absl::MutexLock order(&order_mu_);
      if (!hook_->CheckPrimary().ok()) return evicted;  // a backup evicts what its stream says
      RowEviction::Victims v = store_.eviction().SweepStripe(table, s, &plan, /*erase=*/false);
      // Those past their time to live go; those beyond the cap go to the disk tier, if any.
      for (auto [ids, disk] : {std::make_pair(&v.expired, false), std::make_pair(&v.over_cap, to_disk)}) {
        if (ids->empty()) continue;
        proto::SparseRowsMsg msg;
        msg.set_table(table);
        msg.mutable_ids()->Assign(ids->begin(), ids->end());
        if (!hook_->ForwardEviction(msg, disk).ok()) return evicted;  // no longer primary: keep the rows
        StatusOr<int64_t> n = store_.eviction().Evict(table, *ids, disk);
        if (!n.ok()) DiskTier::StopOnFailure(n.status());
        evicted += *n;
      }
    }
  }
  return evicted;
}

Status ParameterShard::FollowEviction(const proto::SparseRowsMsg& evicted, bool to_disk) {
  PL_RETURN_IF_ERROR(store_.CheckInitialized());
  return store_.eviction().Evict(evicted.table(), evicted.ids(), to_disk).status();
}

}  // namespace pl::pserver
