// Process-wide settings for the math and the allocator. Each binary's main applies
// them (and the Python module on import); library code never calls them.
//
// Thread-safety: call from main before starting threads.
#ifndef PADDLE_LIKE_CORE_RUNTIME_H_
#define PADDLE_LIKE_CORE_RUNTIME_H_

#include <cstdint>

namespace pl {

// OpenMP loops (convolutions, the optimizer) use `threads` (0: all cores); Eigen's own
// GEMM stays on one thread: it synchronises its threads by spinning, so on a shared
// machine a descheduled peer stalls every product for a time slice (pl-bench-core:
// the mlp on 2 threads ran at ~3.7k samples/s with it, ~19k without).
void SetMathThreads(int threads);

// Keeps large freed buffers in the heap instead of returning them to the kernel.
// Every step sends and receives multi-megabyte messages; with glibc's defaults each
// one is a fresh mmap whose pages fault in again (pl-bench-ps: 16-25% of a 16 MB
// push+pull; about 1.6x faster with this).
void KeepLargeBuffersInHeap();

// Returns the heap's free pages to the kernel (glibc's malloc_trim), undoing what
// KeepLargeBuffersInHeap keeps: a server calls it when its traffic pauses, so the
// message buffers of the last burst do not stay resident. Thread-safe.
void ReleaseFreeHeapMemory();

// Resident set size of this process in bytes (from /proc/self/statm), 0 if unknown.
int64_t ResidentBytes();

// Turns off abseil's mutex deadlock detector, unless PL_MUTEX_DEADLOCK_CHECKS=1 (which
// `make test` sets, so the suite still aborts on a lock-order cycle). Debian builds
// abseil without NDEBUG, so every absl::Mutex lock in the process, gRPC's included,
// updates a lock graph under one process-wide spinlock: two threads each locking a
// mutex of its own took 214 ns a lock instead of 9 (2 cores).
void SkipMutexDeadlockChecks();

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_RUNTIME_H_
