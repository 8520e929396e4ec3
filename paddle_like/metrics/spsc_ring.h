// SpscRing: a fixed-capacity queue for one producer thread and one consumer thread,
// without locks: what lets a training step hand its record to the telemetry thread in a
// few nanoseconds (two atomic loads, a copy, one atomic store).
//
// Thread-safety: Push from one thread at a time (the producer), Pop from one thread at a
// time (the consumer; callers that consume from several threads serialise themselves).
#ifndef PADDLE_LIKE_METRICS_SPSC_RING_H_
#define PADDLE_LIKE_METRICS_SPSC_RING_H_

#include <atomic>
#include <cstddef>
#include <vector>

namespace pl::metrics {

template <typename T>
class SpscRing {
 public:
  // Holds up to `capacity` items (>= 1).
  explicit SpscRing(size_t capacity) : slots_(capacity + 1) {}

  // False (and nothing stored) when full: the producer never waits.
  bool Push(const T& item) {
    const size_t head = head_.load(std::memory_order_relaxed);
    const size_t next = head + 1 == slots_.size() ? 0 : head + 1;
    if (next == tail_.load(std::memory_order_acquire)) return false;
    slots_[head] = item;
    head_.store(next, std::memory_order_release);
    return true;
  }

  // False when empty.
  bool Pop(T* item) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    *item = slots_[tail];
    tail_.store(tail + 1 == slots_.size() ? 0 : tail + 1, std::memory_order_release);
    return true;
  }

 private:
  std::vector<T> slots_;  // one slot stays free to tell full from empty
  alignas(64) std::atomic<size_t> head_{0};  // next slot to write (producer)
  alignas(64) std::atomic<size_t> tail_{0};  // next slot to read (consumer)
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_SPSC_RING_H_
