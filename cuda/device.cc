#include "cuda/device.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "cuda/cuda_libraries.h"
#include "cuda/status.h"

namespace pl::cuda {

StatusOr<int> DeviceCount() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it so later launch checks do not report it
    return absl::UnavailableError(absl::StrFormat("no usable CUDA device: cudaGetDeviceCount: %s (%s)",
                                                  cudaGetErrorName(err), cudaGetErrorString(err)));
  }
  if (count == 0) return absl::UnavailableError("no usable CUDA device: cudaGetDeviceCount returned 0");
  return count;
}

namespace {

// A model runs on a GPU when there is a device and the libraries its layers call load.
Status GpuUsable() {
  PL_RETURN_IF_ERROR(DeviceCount().status());
  PL_RETURN_IF_ERROR(LoadCudaLibrary(CudaLibrary::kCublas));
  return LoadCudaLibrary(CudaLibrary::kCudnn);
}

}  // namespace

bool GpuAvailable() { return GpuUsable().ok(); }

std::string GpuUnavailableReason() {
  Status s = GpuUsable();
  return s.ok() ? std::string() : std::string(s.message());
}

Status CheckDevice(int device) {
  PL_ASSIGN_OR_RETURN(int count, DeviceCount());
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GPU %d does not exist (%d visible device%s)", device, count, count == 1 ? "" : "s"));
  }
  return absl::OkStatus();
}

StatusOr<std::string> DescribeDevice(int device) {
  PL_RETURN_IF_ERROR(CheckDevice(device));
  cudaDeviceProp prop;
  PL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  return absl::StrFormat("%s (sm_%d%d, %d SMs, %s)", prop.name, prop.major, prop.minor,
                         prop.multiProcessorCount, HumanBytes(prop.totalGlobalMem));
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    previous_ = -1;
    cudaGetLastError();
  }
  if (previous_ != device) status_ = FromCuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

StatusOr<Stream> Stream::Create(int device) {
  PL_RETURN_IF_ERROR(CheckDevice(device));
  DeviceGuard guard(device);
  PL_RETURN_IF_ERROR(guard.status());
  Stream s;
  PL_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  s.device_ = device;
  return s;
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

Stream::~Stream() { Reset(); }

void Stream::Reset() {
  if (stream_ != nullptr) {
    DeviceGuard guard(device_);
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
}

Status Stream::Synchronize() const {
  return FromCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace pl::cuda
