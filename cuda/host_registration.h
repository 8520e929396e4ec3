// HostRegistration: page-locks (cudaHostRegister) the CPU buffers a GpuModel copies
// to and from on every distributed step, so those copies run by DMA at the bus's
// speed instead of being staged by the runtime through its own pinned buffer
// (pl-bench-gpu, section 4: the cnn's upload + step + download falls from 2.9 ms to
// 1.3 ms on an H100; the pinned copies alone take 0.5 ms).
//
// Buffers are registered lazily, on the first copy that uses them, and re-registered if
// a tensor's storage moved (its pointer changed); small ones and any the driver refuses
// stay pageable, which is correct, only slower. Everything is unregistered on
// destruction, so the owner must be destroyed before the buffers are freed.
//
// Thread-safety: not thread-safe; owned and driven by one GpuModel.
#ifndef PADDLE_LIKE_CUDA_HOST_REGISTRATION_H_
#define PADDLE_LIKE_CUDA_HOST_REGISTRATION_H_

#include <cstddef>
#include <map>

namespace pl::cuda {

class HostRegistration {
 public:
  // Below this a buffer's copy time is call overhead, not bandwidth: not worth a
  // registration (which costs about as much as copying the buffer a few times).
  static constexpr size_t kMinBytes = 64 * 1024;

  HostRegistration() = default;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  // Slot `slot` (a stable id chosen by the caller, e.g. 2 * parameter index + 0/1)
  // now lives at [ptr, ptr + bytes): registers it if it is not yet, moving the slot's
  // registration if the buffer moved. Returns whether the buffer is page-locked.
  bool Ensure(int slot, const void* ptr, size_t bytes);
  size_t registered_bytes() const;

 private:
  struct Entry {
    const void* ptr = nullptr;
    size_t bytes = 0;
    bool pinned = false;  // false: too small, or the driver refused it
  };
  std::map<int, Entry> slots_;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_HOST_REGISTRATION_H_
