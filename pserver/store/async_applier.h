// AsyncApplier: async pushes sent with defer_apply. The handler validates a push and
// queues it here; it is answered at once, and one applier thread (started on first
// use) applies queued pushes in arrival order, advancing the clock after each. At
// most kMaxQueuedPushes wait; further pushes block, until their deadline, for room.
//
// Thread-safety: thread-safe; mu_ guards the queue and is held only to move a push in
// or out (the clock's lock may be taken under it). `apply` runs on the applier thread
// with no lock of this class held.
#ifndef PSERVER_STORE_ASYNC_APPLIER_H_
#define PSERVER_STORE_ASYNC_APPLIER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/version_clock.h"

namespace pl::pserver {

class AsyncApplier {
 public:
  using ApplyFn = std::function<void(const PendingPush& push)>;
  // `index` names the pserver in errors; `clock` must outlive the applier.
  AsyncApplier(int index, VersionClock* clock, ApplyFn apply);
  ~AsyncApplier();  // Close()
  AsyncApplier(const AsyncApplier&) = delete;
  AsyncApplier& operator=(const AsyncApplier&) = delete;

  // Queues a validated push; returns the version when it was queued (without it).
  // DEADLINE_EXCEEDED when no room came before `deadline`; UNAVAILABLE once closed.
  StatusOr<int64_t> Enqueue(std::unique_ptr<PendingPush> push, absl::Time deadline);
  // Waits until every queued push is applied.
  void WaitUntilIdle();
  // Refuses further pushes, applies the queued ones and stops the thread.
  void Close();

  static constexpr size_t kMaxQueuedPushes = 2;

 private:
  void Run();  // the applier thread
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !applying_; }

  const int index_;
  VersionClock* const clock_;
  const ApplyFn apply_;

  absl::Mutex mu_;
  std::deque<std::unique_ptr<PendingPush>> queue_ ABSL_GUARDED_BY(mu_);
  bool applying_ ABSL_GUARDED_BY(mu_) = false;  // the thread holds a popped push
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);     // joined by Close, outside mu_
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_ASYNC_APPLIER_H_
