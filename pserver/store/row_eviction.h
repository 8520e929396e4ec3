// RowEviction: which rows of a shard's tables (sparse_store.h) leave memory, and when.
// Those of a table with a time to live (evict_after_s) untouched for longer; and, while
// the tables hold more than the pserver's memory cap, the least frequently updated (a
// row's step count, which its record holds) and among those the least recently
// touched. By frequency first because a click log's ids are drawn from a skewed law: the
// rows worth keeping are the often-updated ones, which recency alone cannot tell from
// the rows a batch touched once a moment ago. Rows that were hot and went cold are the
// time to live's to evict. With a disk tier the cap's rows move there instead of going.
//
// The sweeper (RowEvictor, ParameterShard::SweepRows) plans a sweep and takes it stripe
// by stripe, so pushes wait at most for one stripe.
//
// Thread-safety: thread-safe (the tables' locks; the cap is atomic).
#ifndef PSERVER_STORE_ROW_EVICTION_H_
#define PSERVER_STORE_ROW_EVICTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/sparse_store.h"

namespace pl::pserver {

class RowEviction {
 public:
  // `tables` outlives it.
  explicit RowEviction(SparseStore* tables) : tables_(tables) {}
  RowEviction(const RowEviction&) = delete;
  RowEviction& operator=(const RowEviction&) = delete;

  // From now on rows can be evicted (the tables note when each row is touched);
  // `cap_bytes` > 0 caps what bytes() counts. A table with evict_after_s turns the notes
  // on by itself. May be called again (a new cap).
  void Enable(int64_t cap_bytes);
  int64_t cap_bytes() const { return cap_bytes_.load(std::memory_order_relaxed); }
  // What the cap counts: each table's rows times RowCost (record, index entry, marks).
  int64_t bytes() const;
  static int64_t RowCost(const SparseTable& t);
  // The cap evicts once bytes() passes kHighWater of it, down to kLowWater.
  static constexpr double kHighWater = 0.95, kLowWater = 0.85;
  // Steps beyond this count as equal (a row updated that often is hot enough).
  static constexpr int64_t kMaxCountedSteps = 1 << 20;

  struct SweepPlan {
    std::map<std::string, uint32_t> expired_before;  // per table: rows touched before this tick
    bool cap = false;           // over the cap: rows with fewer than cap_steps updates go,
    int64_t cap_steps = 0;      // and of the rows with exactly cap_steps, those touched
    uint32_t cap_before = 0;    // before tick cap_before, and at cap_before until
    int64_t cap_bytes_at = 0;   // cap_bytes_at bytes are taken
    bool empty() const { return expired_before.empty() && !cap; }
  };
  // `ttl_due`: plan the time-to-live part too (it needs a scan of the rows, so the
  // sweeper asks for it about once a second; the cap is checked without a scan).
  SweepPlan Plan(bool ttl_due) const;
  // Stripe `stripe` of `table`: the ids of the rows `plan` evicts (it counts down the
  // plan's cap_bytes_at), those past their time to live and those beyond the cap. With
  // `erase` they go at once, under the same lock (the cap's to the disk tier if there
  // is one); else the caller evicts them (Evict), having first sent them to its backups.
  struct Victims {
    std::vector<int64_t> expired, over_cap;
  };
  Victims SweepStripe(const std::string& table, int stripe, SweepPlan* plan, bool erase);
  // Evicts these rows of `table` (those it has), to the disk tier when `to_disk`;
  // returns how many it had. FAILED_PRECONDITION for `to_disk` without a disk tier.
  StatusOr<int64_t> Evict(const std::string& table, absl::Span<const int64_t> ids, bool to_disk = false);
  // A restored row (ShardStore::Loader): with a disk tier, one beyond the cap goes there
  // at once, so a restore never holds more than the cap in memory.
  Status AfterRestore(const std::string& table, int64_t id);

 private:
  // Calls fn(table, its step count (at most kMaxCountedSteps), the tick it was touched
  // at) for every row, each stripe under its lock.
  void ForEachRow(const std::function<void(const SparseTable&, int64_t, uint32_t)>& fn) const;

  SparseStore* const tables_;
  std::atomic<int64_t> cap_bytes_{0};
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_ROW_EVICTION_H_
