// Splitting the dense blocks of one push over a few threads (private to the shard).
//
// Thread-safety: ParallelFor is reentrant; fn must be safe to call concurrently for
// different i.
#ifndef PSERVER_PARALLEL_FOR_H_
#define PSERVER_PARALLEL_FOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace pl::pserver {

// Runs fn(i) for i in [0, n) in contiguous ranges on `threads` threads, this one
// included. Dense blocks are independent (each has its own lock), so a large push is
// scanned and applied on several cores while its trainer waits for the reply.
inline void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto range = [&](int t) {
    for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) fn(i);
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(range, t);
  range(0);
  for (std::thread& h : helpers) h.join();
}

// One thread per MB of dense payload, up to the cores (at most 4).
inline int ThreadsForDense(int64_t floats) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(floats >> 18, 1, std::min<int64_t>(cores, 4)));
}

}  // namespace pl::pserver

#endif  // PSERVER_PARALLEL_FOR_H_
