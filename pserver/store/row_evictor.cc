#include "pserver/store/row_evictor.h"

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

namespace {
constexpr absl::Duration kTimeToLiveSweepEvery = absl::Seconds(1);
constexpr absl::Duration kLogEvery = absl::Seconds(30);
}  // namespace

RowEvictor::RowEvictor(ParameterShard* shard, int64_t cap_bytes) : shard_(shard), start_(absl::Now()) {
  if (cap_bytes > 0) shard_->eviction().Enable(cap_bytes);
  thread_ = std::thread([this] { Run(); });
}

RowEvictor::~RowEvictor() {
  stop_.Notify();
  thread_.join();
}

void RowEvictor::Run() {
  absl::Time last_ttl_sweep = start_, last_log = start_;
  int64_t unlogged = 0;
  while (!stop_.WaitForNotificationWithTimeout(SparseStore::kEvictionTick)) {
    const absl::Time now = absl::Now();
    // Tick 0 stands for "before the first tick" (rows restored and not touched since).
    shard_->tables().SetTick(static_cast<uint32_t>((now - start_) / SparseStore::kEvictionTick) + 1);
    if (!shard_->tables().evicting()) continue;
    const bool ttl_due = now - last_ttl_sweep >= kTimeToLiveSweepEvery;
    if (ttl_due) last_ttl_sweep = now;
    const int64_t evicted = shard_->SweepRows(ttl_due);
    unlogged += evicted;
    if (unlogged > 0 && now - last_log >= kLogEvery) {
      const int64_t cap = shard_->eviction().cap_bytes();
      log::Info(absl::StrCat("pserver ", shard_->index(), ": evicted ", unlogged, " rows in the last ",
                             absl::FormatDuration(now - last_log), "; sparse rows take ", shard_->eviction().bytes() >> 20,
                             " MB", cap > 0 ? absl::StrCat(" of the ", cap >> 20, " MB cap") : ""));
      unlogged = 0;
      last_log = now;
    }
  }
}

}  // namespace pl::pserver
