#include "pserver/replication/stream_applier.h"

#include <utility>

namespace pl::pserver {

StreamApplier::StreamApplier(ApplyFn apply, FailureFn on_failure, size_t max_held, int64_t max_held_bytes)
    : apply_(std::move(apply)),
      on_failure_(std::move(on_failure)),
      max_held_(max_held == 0 ? 1 : max_held),
      max_held_bytes_(max_held_bytes),
      thread_([this] { Run(); }) {}

StreamApplier::~StreamApplier() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void StreamApplier::Enqueue(Update update) {
  absl::MutexLock l(&mu_);
  const int64_t bytes = update.bytes;
  auto room = [this, bytes]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return failed_ || held_.empty() || (held_.size() < max_held_ && held_bytes_ + bytes <= max_held_bytes_);
  };
  mu_.Await(absl::Condition(&room));
  if (failed_) return;  // the replica is on its way out; nothing more is applied
  held_bytes_ += bytes;
  held_.push_back(std::move(update));
}

void StreamApplier::Drain() {
  absl::MutexLock l(&mu_);
  auto drained = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return failed_ || (held_.empty() && !busy_); };
  mu_.Await(absl::Condition(&drained));
}

int64_t StreamApplier::applied() const {
  absl::MutexLock l(&mu_);
  return applied_;
}

void StreamApplier::Run() {
  while (true) {
    Update update;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !held_.empty() || stop_; };
      mu_.Await(absl::Condition(&ready));
      if (held_.empty() || failed_) return;  // stopping, everything applied (or given up)
      update = std::move(held_.front());
      held_.pop_front();
      held_bytes_ -= update.bytes;
      busy_ = true;
    }
    const Status applied = apply_(update);
    if (!applied.ok()) on_failure_(applied);  // before Drain can return
    absl::MutexLock l(&mu_);
    busy_ = false;
    if (applied.ok()) {
      applied_ = update.position;
    } else {
      failed_ = true;
      held_.clear();
      held_bytes_ = 0;
    }
  }
}

}  // namespace pl::pserver
