// MicroBatchStash: a sync step's virtual-trainer pushes (PushRequest.step_expects), held
// from their admission to the step's end, when the shard sums them in virtual-trainer
// order: a float sum's rounding depends on its order, and this order is the job's, not
// the network's, so the step's update is the same bits whoever pushed first
// (docs/consistent-training.md). A shard holds at most one step's worth: its share of
// V gradients.
//
// Thread-safety: thread-safe; mu_ guards the map.
#ifndef PSERVER_STORE_MICRO_BATCH_STASH_H_
#define PSERVER_STORE_MICRO_BATCH_STASH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pserver/store/shard_storage.h"

namespace pl::pserver {

class MicroBatchStash {
 public:
  // Keeps virtual trainer `v`'s push for the step (the barrier admits one per v).
  void Put(int64_t v, std::unique_ptr<PendingPush> push) {
    absl::MutexLock l(&mu_);
    pushes_[v] = std::move(push);
  }
  // The step's pushes in virtual-trainer order, taken out.
  std::vector<std::unique_ptr<PendingPush>> TakeInOrder() {
    absl::MutexLock l(&mu_);
    std::vector<std::unique_ptr<PendingPush>> out;
    out.reserve(pushes_.size());
    for (auto& [v, push] : pushes_) out.push_back(std::move(push));
    pushes_.clear();
    return out;
  }
  bool empty() const {
    absl::MutexLock l(&mu_);
    return pushes_.empty();
  }

 private:
  mutable absl::Mutex mu_;
  std::map<int64_t, std::unique_ptr<PendingPush>> pushes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_MICRO_BATCH_STASH_H_
