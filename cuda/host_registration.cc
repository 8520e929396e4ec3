#include "cuda/host_registration.h"

#include <cuda_runtime.h>

namespace pl::cuda {

HostRegistration::~HostRegistration() {
  for (auto& [slot, e] : slots_) {
    if (e.pinned) (void)cudaHostUnregister(const_cast<void*>(e.ptr));
  }
}

bool HostRegistration::Ensure(int slot, const void* ptr, size_t bytes) {
  Entry& e = slots_[slot];
  if (e.ptr == ptr && e.bytes == bytes) return e.pinned;
  if (e.pinned) (void)cudaHostUnregister(const_cast<void*>(e.ptr));
  e = Entry{ptr, bytes, false};
  if (ptr == nullptr || bytes < kMinBytes) return false;
  // A refusal (an overlapping registration, a driver without the feature) only costs
  // speed; the error is not sticky, so clear it and copy pageable.
  if (cudaHostRegister(const_cast<void*>(ptr), bytes, cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  e.pinned = true;
  return true;
}

size_t HostRegistration::registered_bytes() const {
  size_t total = 0;
  for (const auto& [slot, e] : slots_) total += e.pinned ? e.bytes : 0;
  return total;
}

}  // namespace pl::cuda
