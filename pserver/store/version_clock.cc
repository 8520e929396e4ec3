#include "pserver/store/version_clock.h"

#include "absl/strings/str_cat.h"

namespace pl::pserver {

int64_t VersionClock::version() const {
  absl::MutexLock l(&mu_);
  return version_;
}

int64_t VersionClock::Advance() {
  absl::MutexLock l(&mu_);
  ++version_;
  changed_.SignalAll();
  return version_;
}

void VersionClock::Set(int64_t version) {
  absl::MutexLock l(&mu_);
  version_ = version;
  changed_.SignalAll();
}

Status VersionClock::WaitFor(int64_t min_version, absl::Time deadline) const {
  absl::MutexLock l(&mu_);
  while (version_ < min_version && !shutdown_) {
    if (changed_.WaitWithDeadline(&mu_, deadline) && version_ < min_version) {
      return absl::DeadlineExceededError(absl::StrCat("pserver ", index_, ": waited for version ",
                                                      min_version, ", still at ", version_));
    }
  }
  if (version_ < min_version) {
    return absl::UnavailableError(absl::StrCat("pserver ", index_, " is shutting down"));
  }
  return absl::OkStatus();
}

void VersionClock::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
  changed_.SignalAll();
}

}  // namespace pl::pserver
