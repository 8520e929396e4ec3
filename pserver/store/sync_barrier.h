// SyncBarrier: sync mode's step. Step k's pushes are summed until every participant
// has pushed k; then their mean is applied once and the version becomes k + 1. The
// participants of a step are the live trainers (SetLive) when its first push arrives;
// one that leaves the live set leaves the barrier, one that joins later takes part
// from the next step (its pushes for the current step still count in the mean). A
// trainer that pushes is live from then on unless it has left, even before the
// master's membership says so: steps wait for it rather than finish without it, which
// made its pushes stale, one lost batch after another, for as long as the membership
// took to arrive (a job's start, a trainer added). A push for a finished step is
// stale; a retried push (same trainer, same step) counts once. A push for a later step
// waits on the clock before it comes here.
//
// Virtual trainers (Admit with `expects`, docs/consistent-training.md): a step's
// participants are the virtual trainers its first push names in its mask, not the live
// trainers; each pushes once (whoever computed it: a repeat counts once), every push of
// the step must carry the same mask, and the membership does not touch the step.
//
// The barrier also makes a step's update atomic: a push admitted into the step, and a
// read of it (pull, checkpoint), hold the step open (a StepHold); the update waits
// until no hold is left, and new holds wait until the update is done.
//
// Thread-safety: thread-safe; mu_ guards everything. The clock's lock is taken under
// mu_; no other lock is, and the step's update runs with mu_ released.
#ifndef PSERVER_STORE_SYNC_BARRIER_H_
#define PSERVER_STORE_SYNC_BARRIER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "pserver/store/version_clock.h"

namespace pl::pserver {

class SyncBarrier {
 public:
  // `clock` holds the current step (= version) and must outlive the barrier.
  explicit SyncBarrier(VersionClock* clock) : clock_(clock) {}
  SyncBarrier(const SyncBarrier&) = delete;
  SyncBarrier& operator=(const SyncBarrier&) = delete;

  // While one lives, no step's update runs. Move-only; empty when default-made.
  class StepHold {
   public:
    StepHold() = default;
    StepHold(StepHold&& other) noexcept : barrier_(std::exchange(other.barrier_, nullptr)) {}
    StepHold& operator=(StepHold&&) = delete;
    ~StepHold() {
      if (barrier_ != nullptr) barrier_->Release();
    }

   private:
    friend class SyncBarrier;
    explicit StepHold(SyncBarrier* barrier) : barrier_(barrier) {}
    SyncBarrier* barrier_ = nullptr;
  };

  // Holds the finished step for a read, waiting while an update runs.
  StepHold HoldForRead();

  struct Admission {
    // kRefused: a virtual push whose mask is not the step's, or who is not in it.
    enum Kind { kAdmitted, kStale, kRepeated, kRefused } kind;
    int64_t version;  // the step open when the push came
    StepHold hold;    // kAdmitted: the push's gradients go into the step while it lives
    std::string why = {};  // kRefused
  };
  // Admits `trainer_id`'s push for `step` (<= the version) into the current step. With
  // `expects` (a virtual trainer's push: PushRequest.step_expects), `trainer_id` is the
  // virtual trainer and `expects` the step's mask.
  Admission Admit(int64_t trainer_id, int64_t step, const std::string* expects = nullptr);

  // The trainers the barrier waits for (from the master's membership).
  void SetLive(const std::vector<int64_t>& trainer_ids);

  // When every participant of the step has pushed: waits for the holds to go, calls
  // apply(number of trainers that pushed) and advances the clock. Else does nothing;
  // always nothing while following.
  void MaybeComplete(const std::function<void(int contributors)>& apply);
  // A replicated shard's backup: steps end only when the primary's stream says so
  // (CompleteNow), never by the backup's own view of who is live.
  void SetFollowing(bool following);
  // Ends the current step now: waits for the holds, calls apply and advances the clock.
  void CompleteNow(const std::function<void(int contributors)>& apply);

 private:
  void Release();
  // The step's end, once mu_ saw it due (completing_ set by the caller).
  void Finish(const std::function<void(int contributors)>& apply) ABSL_LOCKS_EXCLUDED(mu_);

  VersionClock* const clock_;

  absl::Mutex mu_;
  absl::flat_hash_set<int64_t> live_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> departed_ ABSL_GUARDED_BY(mu_);  // left the live set: never live again
  absl::flat_hash_set<int64_t> participants_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> pushed_ ABSL_GUARDED_BY(mu_);
  bool step_started_ ABSL_GUARDED_BY(mu_) = false;
  bool virtual_step_ ABSL_GUARDED_BY(mu_) = false;  // started by a virtual push: participants from its mask
  std::string expects_ ABSL_GUARDED_BY(mu_);        // that mask
  bool completing_ ABSL_GUARDED_BY(mu_) = false;  // the step is closed: its update is due
  bool following_ ABSL_GUARDED_BY(mu_) = false;
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_SYNC_BARRIER_H_
