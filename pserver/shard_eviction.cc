// ParameterShard's eviction sweep, alone or as a replicated primary, and a backup's
// application of the primary's evictions (shard.h).
#include "absl/strings/str_cat.h"
#include "pserver/shard.h"

namespace pl::pserver {

int64_t ParameterShard::SweepRows(bool ttl_due) {
  if (!store_.initialized() || !store_.evicting()) return 0;
  ShardStore::SweepPlan plan = store_.PlanSweep(ttl_due);
  if (plan.empty()) return 0;
  int64_t evicted = 0;
  for (const std::string& table : store_.TableNames()) {
    for (int s = 0; s < kRowStripes; ++s) {
      if (hook_ == nullptr) {
        evicted += static_cast<int64_t>(store_.SweepStripe(table, s, &plan, /*erase=*/true).size());
        continue;
      }
      // Under the order lock no push is applied meanwhile, so the stream holds the
      // eviction exactly where this replica makes it.
      absl::MutexLock order(&order_mu_);
      if (!hook_->CheckPrimary().ok()) return evicted;  // a backup evicts what its stream says
      std::vector<int64_t> victims = store_.SweepStripe(table, s, &plan, /*erase=*/false);
      if (victims.empty()) continue;
      proto::SparseRowsMsg msg;
      msg.set_table(table);
      msg.mutable_ids()->Assign(victims.begin(), victims.end());
      if (!hook_->ForwardEviction(msg).ok()) return evicted;  // no longer primary: keep the rows
      evicted += store_.Evict(table, victims);
    }
  }
  return evicted;
}

Status ParameterShard::FollowEviction(const proto::SparseRowsMsg& evicted) {
  PL_RETURN_IF_ERROR(store_.CheckInitialized());
  store_.Evict(evicted.table(), evicted.ids());
  return absl::OkStatus();
}

}  // namespace pl::pserver
