// Which GPUs this process can use, an RAII guard for the current device, and an owned
// CUDA stream. A machine without a GPU (or with a driver too old for this build's
// runtime) is a normal condition: DeviceCount() returns UNAVAILABLE naming the cause,
// GpuAvailable() is false, and callers fall back to the CPU path.
//
// Thread-safety: the free functions are thread-safe. The current device is a
// per-thread setting of the CUDA runtime, which DeviceGuard saves and restores.
// A Stream is used by one thread at a time.
#ifndef PADDLE_LIKE_CUDA_DEVICE_H_
#define PADDLE_LIKE_CUDA_DEVICE_H_

#include <string>

#include <cuda_runtime.h>

#include "paddle_like/core/status.h"

namespace pl::cuda {

// Number of visible devices (honours CUDA_VISIBLE_DEVICES), or UNAVAILABLE with the
// runtime's reason ("cudaGetDeviceCount: cudaErrorInsufficientDriver (...)") when
// there are none.
StatusOr<int> DeviceCount();
// True when at least one device can be used and cuBLAS and cuDNN load
// (cuda_libraries.h; NCCL is needed only by NcclCommunicator).
bool GpuAvailable();
// Why no GPU can be used ("" when one can); for skip messages and logs.
std::string GpuUnavailableReason();
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)".
StatusOr<std::string> DescribeDevice(int device);
// INVALID_ARGUMENT unless 0 <= device < DeviceCount().
Status CheckDevice(int device);

// Makes `device` current for this thread for the guard's lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // The status of switching to the device; check before using it.
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

// A non-blocking stream on one device, destroyed with the object.
class Stream {
 public:
  static StatusOr<Stream> Create(int device);
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  // Blocks until all work queued on the stream is done; reports asynchronous errors
  // of earlier kernels (the first place they can surface).
  Status Synchronize() const;

 private:
  void Reset();
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_DEVICE_H_
