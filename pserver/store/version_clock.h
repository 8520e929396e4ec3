// VersionClock: the shard's version (async: pushes applied; sync: steps finished),
// and the wait for it that pulls and early sync pushes make.
//
// Thread-safety: thread-safe; mu_ guards everything and is taken last (no other lock
// is acquired while it is held).
#ifndef PSERVER_STORE_VERSION_CLOCK_H_
#define PSERVER_STORE_VERSION_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl::pserver {

class VersionClock {
 public:
  // `index` names the pserver in errors.
  explicit VersionClock(int index) : index_(index) {}

  int64_t version() const;
  // Adds one and wakes the waiters; returns the new version.
  int64_t Advance();
  void Set(int64_t version);

  // OK once version >= min_version; DEADLINE_EXCEEDED at `deadline`, UNAVAILABLE
  // after Shutdown.
  Status WaitFor(int64_t min_version, absl::Time deadline) const;
  // Wakes every waiter (for a server going down); later waits fail at once.
  void Shutdown();

 private:
  const int index_;

  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_VERSION_CLOCK_H_
