// PageWarmer: faults in the pages of memory that is about to be written, on a thread of
// its own, ahead of a writer that fills it from a socket or a file (a replica's
// snapshot, a restore). Each fresh 4 KB page costs a fault and a zeroing; taken here,
// they run beside the writer's copies instead of inside them. MADV_POPULATE_WRITE
// leaves contents alone, so it may run while the writer writes the same memory.
//
// Thread-safety: thread-safe. The memory handed to Add must stay mapped until the
// warmer is destroyed (it joins its thread).
#ifndef PADDLE_LIKE_DIST_PAGE_WARMER_H_
#define PADDLE_LIKE_DIST_PAGE_WARMER_H_

#include <cstddef>
#include <deque>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace pl {

// Faults in, now and on this thread, the whole pages inside [data, data + n): one call
// for many pages, cheaper than a fault per page taken inside a copy. Contents are left
// alone. Advice only: before Linux 5.14 it does nothing.
void PopulateForWrite(void* data, size_t n);

// Asks for transparent huge pages (2 MB) for the whole 2 MB spans inside [data, data + n)
// when n is at least kHugePageMinBytes, where the kernel leaves them to madvise (the
// default): faulting in a 206 MB block took 22 ms instead of 110 ms with 4 KB pages on
// the 2-core machine (benchmarks/README.md, catch-up), and its copies miss the TLB less.
// Advice only: without THP it does nothing.
inline constexpr size_t kHugePageMinBytes = size_t{4} << 20;
void AdviseHugePages(void* data, size_t n);

class PageWarmer {
 public:
  // Ranges smaller than this are left to the writer: a thread's hand-off costs more.
  static constexpr size_t kMinBytes = size_t{1} << 20;

  PageWarmer();
  ~PageWarmer();  // stops, dropping what is still queued, and joins
  PageWarmer(const PageWarmer&) = delete;
  PageWarmer& operator=(const PageWarmer&) = delete;

  // Queues [data, data + bytes), to be faulted in after what was queued before.
  void Add(void* data, size_t bytes);

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<std::pair<char*, size_t>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_PAGE_WARMER_H_
