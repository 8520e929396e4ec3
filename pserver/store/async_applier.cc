#include "pserver/store/async_applier.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pl::pserver {

AsyncApplier::AsyncApplier(int index, VersionClock* clock, ApplyFn apply)
    : index_(index), clock_(clock), apply_(std::move(apply)) {}

AsyncApplier::~AsyncApplier() { Close(); }

StatusOr<int64_t> AsyncApplier::Enqueue(std::unique_ptr<PendingPush> push, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto has_room = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return closed_ || queue_.size() < kMaxQueuedPushes;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&has_room), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("pserver ", index_, ": ", queue_.size(),
                                                    " pushes still wait to be applied at the deadline"));
  }
  if (closed_) return absl::UnavailableError(absl::StrCat("pserver ", index_, " is shutting down"));
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  queue_.push_back(std::move(push));
  return clock_->version();
}

void AsyncApplier::Run() {
  while (true) {
    std::unique_ptr<PendingPush> push;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return closed_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // closed, and everything queued is applied
      push = std::move(queue_.front());
      queue_.pop_front();
      applying_ = true;
    }
    apply_(*push);
    clock_->Advance();
    push.reset();  // lets go of the received message
    absl::MutexLock l(&mu_);
    applying_ = false;
  }
}

void AsyncApplier::WaitUntilIdle() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(this, &AsyncApplier::Idle));
}

void AsyncApplier::Close() {
  std::thread thread;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;  // the thread applies what is queued, then exits
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
}

}  // namespace pl::pserver
