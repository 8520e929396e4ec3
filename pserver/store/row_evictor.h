// RowEvictor: the thread that evicts a shard's sparse rows in the background. Every
// SparseStore::kEvictionTick it advances the shard's eviction clock (the tick rows are
// marked with when touched) and sweeps when the sparse rows are over the memory cap;
// once a second it also sweeps the rows past their table's time to live. On a backup the clock runs too (so a
// promoted backup knows which rows are cold), but only the primary's stream evicts.
//
// Thread-safety: construct and destroy on one thread; the shard is thread-safe.
#ifndef PSERVER_STORE_ROW_EVICTOR_H_
#define PSERVER_STORE_ROW_EVICTOR_H_

#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

class RowEvictor {
 public:
  // Turns eviction on when `cap_bytes` > 0 (else it follows the tables' evict_after_s)
  // and starts the thread. `shard` outlives the evictor.
  RowEvictor(ParameterShard* shard, int64_t cap_bytes);
  ~RowEvictor();  // stops the thread
  RowEvictor(const RowEvictor&) = delete;
  RowEvictor& operator=(const RowEvictor&) = delete;

 private:
  void Run();

  ParameterShard* const shard_;
  const absl::Time start_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_ROW_EVICTOR_H_
