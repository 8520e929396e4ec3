// CachingAllocator: device memory for GPU tensors without a cudaMalloc/cudaFree per
// tensor (each of which synchronises the device). Requests are rounded up to a size
// class — multiples of 512 B up to 1 MiB, then the next quarter power of two
// (1, 1.25, 1.5, 1.75 x 2^k), so at most 25% is wasted — and a freed block goes to
// its class's free list, from which the next request of the same class is served.
// When cudaMalloc fails the cache is released and the allocation retried once; a
// request that still fails is RESOURCE_EXHAUSTED naming the requested size, the
// device's free/total memory and what the allocator holds.
//
// Reuse is stream-ordered: a freed block is handed out again at once, so work that
// still uses it must be queued on the same stream as the next user's work, or have
// completed. GpuModel and the ops run each device's work on one stream (GpuContext),
// which satisfies this; code using several streams must synchronise before freeing.
//
// There is one allocator per device for the process (For(device)); instances are
// never destroyed, since tensors released during static destruction still return
// their blocks to them. Thread-safety: thread-safe (one mutex per device).
//
// Also here: device tensors on top of it (AllocateDeviceTensor), pinned host
// tensors, and explicit host<->device copies.
#ifndef PADDLE_LIKE_CUDA_ALLOCATOR_H_
#define PADDLE_LIKE_CUDA_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include <cuda_runtime.h>

#include "paddle_like/core/tensor.h"

namespace pl::cuda {

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out (class-rounded sizes)
  size_t cached_bytes = 0;          // in free blocks kept for reuse
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  int64_t allocations = 0;          // Allocate() calls that succeeded
  int64_t cache_hits = 0;           // ... served from a free list
  int64_t device_mallocs = 0;       // cudaMalloc calls made
};

class CachingAllocator {
 public:
  // The allocator of `device` (not checked here: Allocate reports a bad device).
  static CachingAllocator& For(int device);

  // The size class a request of `bytes` is rounded up to.
  static size_t RoundSize(size_t bytes);

  // A block of at least `bytes` (non-zero); `what` names the user in errors.
  StatusOr<void*> Allocate(size_t bytes, const char* what = "CachingAllocator");
  // Returns a block from Allocate to its free list; unknown pointers are ignored.
  void Free(void* ptr);
  // Gives every cached (free) block back to the device.
  Status EmptyCache();
  AllocatorStats stats() const;
  void ResetPeak();
  int device() const { return device_; }

 private:
  explicit CachingAllocator(int device) : device_(device) {}
  void ReleaseCachedLocked();  // requires mu_

  const int device_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;          // class size -> block      (mu_)
  std::unordered_map<void*, size_t> in_use_;   // block -> class size      (mu_)
  AllocatorStats stats_;                       //                          (mu_)
};

// An uninitialised float32/int64 tensor on `device`, its storage returned to the
// caching allocator when the last Tensor sharing it goes away.
StatusOr<Tensor> AllocateDeviceTensor(const Shape& shape, DType dtype, int device);
// A device tensor of zeros, filled on `stream`.
StatusOr<Tensor> DeviceZeros(const Shape& shape, DType dtype, int device, cudaStream_t stream);
// A CPU tensor in page-locked memory: copies from/to it are truly asynchronous and
// run at full bus speed. Pinned memory is scarce; use it for staging buffers.
StatusOr<Tensor> AllocatePinnedHostTensor(const Shape& shape, DType dtype);

// Queues a copy host -> device (same shape and dtype). A pageable `host` is staged by
// the runtime and may be reused when this returns; a pinned one must stay untouched
// until the stream reaches the copy.
Status CopyToDevice(const Tensor& host, const Tensor& dev, cudaStream_t stream);
// Queues a copy device -> host. Into pageable memory the call returns once the data
// has arrived; into pinned memory it returns at once: synchronise the stream first.
Status CopyToHost(const Tensor& dev, const Tensor& host, cudaStream_t stream);
// Device -> device copy on `stream` (same shape and dtype).
Status CopyDeviceToDevice(const Tensor& src, const Tensor& dst, cudaStream_t stream);
// A host tensor with the contents of `dev` (waits for the copy).
StatusOr<Tensor> ToHost(const Tensor& dev, cudaStream_t stream);
// A device tensor with the contents of `host` (waits for the copy).
StatusOr<Tensor> ToDevice(const Tensor& host, int device, cudaStream_t stream);

// Which device a device tensor lives on (from the pointer), or INVALID_ARGUMENT.
StatusOr<int> DeviceOf(const Tensor& t);

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_ALLOCATOR_H_
