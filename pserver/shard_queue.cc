// ParameterShard's deferred pushes (PushRequest.defer_apply): validated by the
// handler, queued, and applied in arrival order by one applier thread.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pserver/shard.h"
#include "pserver/shard_internal.h"

namespace pl::pserver {

StatusOr<int64_t> ParameterShard::Push(PushFrame&& frame, absl::Time deadline) {
  if (!frame.header().defer_apply() || sync()) return Push(static_cast<const PushFrame&>(frame), deadline);
  auto queued = std::make_unique<QueuedPush>();
  queued->frame = std::move(frame);  // before Resolve: the resolved push points into it
  {
    absl::ReaderMutexLock pl(&params_mu_);
    PL_RETURN_IF_ERROR(CheckInitialized());
    Status valid = Resolve(queued->frame, &queued->resolved);
    if (!valid.ok()) {
      ++pushes_rejected_;
      return valid;
    }
  }
  return Enqueue(std::move(queued), deadline);
}

StatusOr<int64_t> ParameterShard::Enqueue(std::unique_ptr<QueuedPush> push, absl::Time deadline) {
  absl::MutexLock q(&queue_mu_);
  auto has_room = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return queue_closed_ || queue_.size() < kMaxQueuedPushes;
  };
  if (!queue_mu_.AwaitWithDeadline(absl::Condition(&has_room), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("pserver ", index_, ": ", queue_.size(),
                                                    " pushes still wait to be applied at the deadline"));
  }
  if (queue_closed_) return absl::UnavailableError(absl::StrCat("pserver ", index_, " is shutting down"));
  if (!applier_.joinable()) applier_ = std::thread([this] { ApplyQueued(); });
  queue_.push_back(std::move(push));
  return version();
}

void ParameterShard::ApplyQueued() {
  while (true) {
    std::unique_ptr<QueuedPush> push;
    {
      absl::MutexLock q(&queue_mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return queue_closed_ || !queue_.empty(); };
      queue_mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // closed, and everything queued is applied
      push = std::move(queue_.front());
      queue_.pop_front();
      applying_ = true;
    }
    {
      absl::ReaderMutexLock pl(&params_mu_);
      absl::ReaderMutexLock sl(&step_mu_);
      ApplyAsync(push->resolved);
      ++pushes_applied_;
      sparse_rows_pushed_ += push->resolved.rows;
    }
    {
      absl::MutexLock l(&version_mu_);
      ++version_;
      version_cv_.SignalAll();
    }
    push.reset();  // lets go of the received message
    absl::MutexLock q(&queue_mu_);
    applying_ = false;
  }
}

void ParameterShard::WaitForQueuedPushes() {
  absl::MutexLock q(&queue_mu_);
  queue_mu_.Await(absl::Condition(this, &ParameterShard::QueueIdle));
}

}  // namespace pl::pserver
