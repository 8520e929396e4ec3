#include "paddle_like/core/runtime.h"

#include <malloc.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include <Eigen/Core>

#include "absl/synchronization/mutex.h"

namespace pl {

void SetMathThreads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  Eigen::setNbThreads(1);
}

void KeepLargeBuffersInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

void ReleaseFreeHeapMemory() { malloc_trim(0); }

void SkipMutexDeadlockChecks() {
  const char* keep = std::getenv("PL_MUTEX_DEADLOCK_CHECKS");
  if (keep != nullptr && std::strcmp(keep, "1") == 0) return;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace pl
