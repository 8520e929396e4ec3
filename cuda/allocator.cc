#include "cuda/allocator.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "cuda/device.h"
#include "cuda/status.h"

namespace pl::cuda {
namespace {

constexpr size_t kSmallStep = 512;         // small classes: multiples of 512 B
constexpr size_t kSmallLimit = 1 << 20;    // up to 1 MiB

Status CheckTensorPair(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.defined() || !b.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": undefined tensor"));
  }
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": source ", DTypeName(a.dtype()), " ",
                                                   a.ShapeString(), " vs destination ",
                                                   DTypeName(b.dtype()), " ", b.ShapeString()));
  }
  return absl::OkStatus();
}

Status CheckOn(const Tensor& t, Device d, const char* op, const char* role) {
  if (t.device() != d) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the ", role, " must be a ",
                                                   d == Device::kCPU ? "CPU" : "CUDA", " tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

CachingAllocator& CachingAllocator::For(int device) {
  static std::mutex* mu = new std::mutex;
  static auto* allocators = new std::vector<CachingAllocator*>;
  std::lock_guard<std::mutex> lock(*mu);
  const size_t index = device < 0 ? 0 : static_cast<size_t>(device);
  if (allocators->size() <= index) allocators->resize(index + 1, nullptr);
  if ((*allocators)[index] == nullptr) (*allocators)[index] = new CachingAllocator(device);
  return *(*allocators)[index];
}

size_t CachingAllocator::RoundSize(size_t bytes) {
  if (bytes == 0) return kSmallStep;
  if (bytes <= kSmallLimit) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  // Quarter powers of two: with p the largest power of two <= bytes, the classes in
  // [p, 2p) are p, 1.25p, 1.5p, 1.75p.
  size_t p = size_t{1} << (63 - __builtin_clzll(static_cast<unsigned long long>(bytes)));
  const size_t quarter = p / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

StatusOr<void*> CachingAllocator::Allocate(size_t bytes, const char* what) {
  const size_t size = RoundSize(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find(size);
  if (it != free_.end()) {
    void* ptr = it->second;
    free_.erase(it);
    stats_.cached_bytes -= size;
    in_use_[ptr] = size;
    stats_.allocated_bytes += size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ++stats_.allocations;
    ++stats_.cache_hits;
    return ptr;
  }
  DeviceGuard guard(device_);
  PL_RETURN_IF_ERROR(Annotate(guard.status(), what));
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation && !free_.empty()) {
    // Blocks of other classes may be what stands in the way: give them back, retry.
    cudaGetLastError();
    ReleaseCachedLocked();
    err = cudaMalloc(&ptr, size);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return OutOfMemoryError(
        what, device_, bytes,
        absl::StrFormat("this process's allocator holds %s in use and %s cached",
                        HumanBytes(stats_.allocated_bytes), HumanBytes(stats_.cached_bytes)));
  }
  PL_RETURN_IF_ERROR(FromCuda(err, absl::StrCat(what, ": cudaMalloc").c_str()));
  ++stats_.device_mallocs;
  in_use_[ptr] = size;
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.allocations;
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) return;
  const size_t size = it->second;
  in_use_.erase(it);
  stats_.allocated_bytes -= size;
  stats_.cached_bytes += size;
  free_.emplace(size, ptr);
}

void CachingAllocator::ReleaseCachedLocked() {
  DeviceGuard guard(device_);
  for (auto& [size, ptr] : free_) cudaFree(ptr);
  free_.clear();
  stats_.cached_bytes = 0;
}

Status CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceGuard guard(device_);
  PL_RETURN_IF_ERROR(guard.status());
  Status status;
  for (auto& [size, ptr] : free_) {
    Status s = FromCuda(cudaFree(ptr), "cudaFree");
    if (status.ok()) status = s;
  }
  free_.clear();
  stats_.cached_bytes = 0;
  return status;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

StatusOr<Tensor> AllocateDeviceTensor(const Shape& shape, DType dtype, int device) {
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError("AllocateDeviceTensor: negative dimension in " +
                                        ShapeToString(shape));
    }
  }
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  if (bytes == 0) {
    return Tensor::FromStorage(Storage::Wrap(nullptr, 0, Device::kCUDA, nullptr), shape, dtype);
  }
  PL_RETURN_IF_ERROR(CheckDevice(device));
  CachingAllocator* alloc = &CachingAllocator::For(device);
  std::string what = absl::StrCat("AllocateDeviceTensor(", DTypeName(dtype), " ",
                                  ShapeToString(shape), ")");
  PL_ASSIGN_OR_RETURN(void* ptr, alloc->Allocate(bytes, what.c_str()));
  return Tensor::FromStorage(
      Storage::Wrap(ptr, bytes, Device::kCUDA, [alloc, ptr] { alloc->Free(ptr); }), shape, dtype);
}

StatusOr<Tensor> DeviceZeros(const Shape& shape, DType dtype, int device, cudaStream_t stream) {
  PL_ASSIGN_OR_RETURN(Tensor t, AllocateDeviceTensor(shape, dtype, device));
  if (t.bytes() > 0) {
    DeviceGuard guard(device);
    PL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(t.raw_data(), 0, t.bytes(), stream));
  }
  return t;
}

StatusOr<Tensor> AllocatePinnedHostTensor(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  void* ptr = nullptr;
  if (bytes > 0) {
    cudaError_t err = cudaMallocHost(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "AllocatePinnedHostTensor: cannot pin ", HumanBytes(bytes), " for ", ShapeToString(shape)));
    }
    PL_RETURN_IF_ERROR(FromCuda(err, "cudaMallocHost"));
  }
  return Tensor::FromStorage(
      Storage::Wrap(ptr, bytes, Device::kCPU, [ptr] { if (ptr) cudaFreeHost(ptr); }), shape, dtype);
}

StatusOr<int> DeviceOf(const Tensor& t) {
  if (t.device() != Device::kCUDA || t.raw_data() == nullptr) {
    return absl::InvalidArgumentError("DeviceOf: not an allocated CUDA tensor");
  }
  cudaPointerAttributes attr;
  PL_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attr, t.raw_data()));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    return absl::InvalidArgumentError("DeviceOf: the pointer is not device memory");
  }
  return attr.device;
}

Status CopyToDevice(const Tensor& host, const Tensor& dev, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckTensorPair(host, dev, "CopyToDevice"));
  PL_RETURN_IF_ERROR(CheckOn(host, Device::kCPU, "CopyToDevice", "source"));
  PL_RETURN_IF_ERROR(CheckOn(dev, Device::kCUDA, "CopyToDevice", "destination"));
  if (host.bytes() == 0) return absl::OkStatus();
  return FromCuda(cudaMemcpyAsync(dev.raw_data(), host.raw_data(), host.bytes(),
                                  cudaMemcpyHostToDevice, stream),
                  "CopyToDevice: cudaMemcpyAsync");
}

Status CopyToHost(const Tensor& dev, const Tensor& host, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckTensorPair(dev, host, "CopyToHost"));
  PL_RETURN_IF_ERROR(CheckOn(dev, Device::kCUDA, "CopyToHost", "source"));
  PL_RETURN_IF_ERROR(CheckOn(host, Device::kCPU, "CopyToHost", "destination"));
  if (host.bytes() == 0) return absl::OkStatus();
  return FromCuda(cudaMemcpyAsync(host.raw_data(), dev.raw_data(), dev.bytes(),
                                  cudaMemcpyDeviceToHost, stream),
                  "CopyToHost: cudaMemcpyAsync");
}

Status CopyDeviceToDevice(const Tensor& src, const Tensor& dst, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckTensorPair(src, dst, "CopyDeviceToDevice"));
  PL_RETURN_IF_ERROR(CheckOn(src, Device::kCUDA, "CopyDeviceToDevice", "source"));
  PL_RETURN_IF_ERROR(CheckOn(dst, Device::kCUDA, "CopyDeviceToDevice", "destination"));
  if (src.bytes() == 0) return absl::OkStatus();
  return FromCuda(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.bytes(),
                                  cudaMemcpyDeviceToDevice, stream),
                  "CopyDeviceToDevice: cudaMemcpyAsync");
}

StatusOr<Tensor> ToHost(const Tensor& dev, cudaStream_t stream) {
  Tensor host(dev.shape(), dev.dtype());
  PL_RETURN_IF_ERROR(CopyToHost(dev, host, stream));
  PL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return host;
}

StatusOr<Tensor> ToDevice(const Tensor& host, int device, cudaStream_t stream) {
  PL_ASSIGN_OR_RETURN(Tensor dev, AllocateDeviceTensor(host.shape(), host.dtype(), device));
  PL_RETURN_IF_ERROR(CopyToDevice(host, dev, stream));
  PL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return dev;
}

}  // namespace pl::cuda
