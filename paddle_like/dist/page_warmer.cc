#include "paddle_like/dist/page_warmer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace pl {
namespace {

// Faulted in a piece at a time, so that a stop is noticed within one piece.
constexpr size_t kPieceBytes = size_t{8} << 20;

}  // namespace

void PopulateForWrite(void* data, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages inside the range only: the partial ones at its ends may belong to other
  // objects, and the writer faults them in itself.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) / page * page;
  if (begin < end) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

void AdviseHugePages(void* data, size_t n) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (n < kHugePageMinBytes) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) / kHuge * kHuge;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + n) / kHuge * kHuge;
  if (begin < end) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

PageWarmer::PageWarmer() : thread_([this] { Run(); }) {}

PageWarmer::~PageWarmer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void PageWarmer::Add(void* data, size_t bytes) {
  if (bytes < kMinBytes) return;
  absl::MutexLock l(&mu_);
  queue_.emplace_back(static_cast<char*>(data), bytes);
}

void PageWarmer::Run() {
  while (true) {
    std::pair<char*, size_t> range;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      range = queue_.front();
      queue_.pop_front();
    }
    char* at = static_cast<char*>(range.first);
    for (size_t done = 0; done < range.second; done += kPieceBytes) {
      {
        absl::MutexLock l(&mu_);
        if (stop_) return;
      }
      PopulateForWrite(at + done, std::min(kPieceBytes, range.second - done));
    }
  }
}

}  // namespace pl
