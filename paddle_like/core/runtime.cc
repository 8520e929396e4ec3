#include "paddle_like/core/runtime.h"

#include <malloc.h>
#include <unistd.h>
#include <omp.h>

#include <cstdio>
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

int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

void SkipMutexDeadlockChecks() {
  const char* keep = std::getenv("PL_MUTEX_DEADLOCK_CHECKS");
  if (keep != nullptr && std::strcmp(keep, "1") == 0) return;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace pl
