#include "pserver/store/sync_barrier.h"

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/step_mask.h"

namespace pl::pserver {

SyncBarrier::StepHold SyncBarrier::HoldForRead() {
  absl::MutexLock l(&mu_);
  auto open = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !completing_; };
  mu_.Await(absl::Condition(&open));
  ++holds_;
  return StepHold(this);
}

void SyncBarrier::Release() {
  absl::MutexLock l(&mu_);
  --holds_;
}

SyncBarrier::Admission SyncBarrier::Admit(int64_t trainer_id, int64_t step, const std::string* expects) {
  absl::MutexLock l(&mu_);
  auto open = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !completing_; };
  mu_.Await(absl::Condition(&open));
  // Stable while the step is open: the version changes only in MaybeComplete.
  const int64_t v = clock_->version();
  if (expects != nullptr) {
    if (step < v) return {Admission::kStale, v, StepHold()};
    if (!step_started_) {
      step_started_ = true;
      virtual_step_ = true;
      expects_ = *expects;
      participants_.clear();
      for (int64_t v : StepMaskMembers(expects_)) participants_.insert(v);
    } else if (!virtual_step_) {
      return {Admission::kRefused, v, StepHold(),
              absl::StrCat("step ", v, " was begun by a trainer's push, not a virtual trainer's: the job's trainers "
                           "disagree on its mode")};
    } else if (*expects != expects_) {
      return {Admission::kRefused, v, StepHold(),
              absl::StrCat("virtual trainer ", trainer_id, "'s push for step ", v,
                           " expects other virtual trainers than the step's first push did: the trainers disagree "
                           "on the job's schedule (a different --batch_size?)")};
    }
    if (!participants_.contains(trainer_id)) {
      return {Admission::kRefused, v, StepHold(),
              absl::StrCat("virtual trainer ", trainer_id, " has no micro-batch in step ", v, " (its mask leaves it out)")};
    }
    if (!pushed_.insert(trainer_id).second) return {Admission::kRepeated, v, StepHold()};
    ++holds_;
    return {Admission::kAdmitted, v, StepHold(this)};
  }
  if (step_started_ && virtual_step_ && step >= v) {
    return {Admission::kRefused, v, StepHold(),
            absl::StrCat("step ", v, " takes virtual trainers' micro-batches: trainer ", trainer_id,
                         "'s push names none (the job's trainers disagree on its mode)")};
  }
  // Ids are never reused: one that left stays out (a push it had in flight must not
  // make every later step wait for it).
  if (!departed_.contains(trainer_id)) live_.insert(trainer_id);
  if (step < v) return {Admission::kStale, v, StepHold()};  // its step finished without it
  if (!step_started_) {
    step_started_ = true;
    participants_ = live_;
  }
  if (!pushed_.insert(trainer_id).second) return {Admission::kRepeated, v, StepHold()};
  ++holds_;
  return {Admission::kAdmitted, v, StepHold(this)};
}

void SyncBarrier::SetLive(const std::vector<int64_t>& trainer_ids) {
  absl::MutexLock l(&mu_);
  absl::flat_hash_set<int64_t> now(trainer_ids.begin(), trainer_ids.end());
  for (int64_t id : live_) {
    if (!now.contains(id)) departed_.insert(id);
  }
  live_ = std::move(now);
  // A trainer that left the live set leaves the current step's barrier too (a virtual
  // trainer's step waits for its micro-batch, whoever brings it).
  if (virtual_step_) return;
  absl::erase_if(participants_, [&](int64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !live_.contains(id); });
}

void SyncBarrier::SetFollowing(bool following) {
  absl::MutexLock l(&mu_);
  following_ = following;
}

void SyncBarrier::MaybeComplete(const std::function<void(int contributors)>& apply) {
  {
    absl::MutexLock l(&mu_);
    if (following_ || !step_started_ || completing_) return;
    for (int64_t id : participants_) {
      if (!pushed_.contains(id)) return;
    }
    completing_ = true;  // no push or read enters the step any more
  }
  Finish(apply);
}

void SyncBarrier::CompleteNow(const std::function<void(int contributors)>& apply) {
  {
    absl::MutexLock l(&mu_);
    auto open = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !completing_; };
    mu_.Await(absl::Condition(&open));
    completing_ = true;
  }
  Finish(apply);
}

void SyncBarrier::Finish(const std::function<void(int contributors)>& apply) {
  int contributors = 0;
  {
    absl::MutexLock l(&mu_);
    auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return holds_ == 0; };
    mu_.Await(absl::Condition(&idle));
    contributors = static_cast<int>(pushed_.size());
  }
  apply(contributors);
  clock_->Advance();
  absl::MutexLock l(&mu_);
  pushed_.clear();
  participants_.clear();
  step_started_ = false;
  virtual_step_ = false;
  expects_.clear();
  completing_ = false;
}

}  // namespace pl::pserver
