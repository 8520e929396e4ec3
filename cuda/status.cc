#include "cuda/status.h"

#include <string>

#include "absl/strings/str_format.h"
#include "cuda/dynamic_api.h"

namespace pl::cuda {
namespace {

// The expression text of the macros is long ("cublasGemmEx(handle, ...)"); the call's
// name up to the parenthesis is what a reader needs.
std::string CallName(const char* what) {
  std::string s(what ? what : "CUDA call");
  size_t paren = s.find('(');
  if (paren != std::string::npos && paren > 0) s.resize(paren);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  // Calls go through dynamic_api.h's wrappers; the message names the library's function.
  if (s.rfind("dyn::", 0) == 0) s.erase(0, 5);
  return s;
}

// The library's own text for a code, or the number where the library could not be loaded.
std::string CudnnErrorText(cudnnStatus_t err) {
  if (!LoadCudaLibrary(CudaLibrary::kCudnn).ok()) return absl::StrFormat("cuDNN status %d", static_cast<int>(err));
  return dyn::cudnnGetErrorString(err);
}

std::string NcclErrorText(ncclResult_t err) {
  if (!LoadCudaLibrary(CudaLibrary::kNccl).ok()) return absl::StrFormat("NCCL result %d", static_cast<int>(err));
  return dyn::ncclGetErrorString(err);
}

}  // namespace

std::string HumanBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", bytes) : absl::StrFormat("%.2f %s", v, units[u]);
}

Status FromCuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s: %s (%s)", CallName(what), cudaGetErrorName(err),
                                    cudaGetErrorString(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

const char* CublasStatusName(cublasStatus_t err) {
  switch (err) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

Status FromCublas(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s: %s", CallName(what), CublasStatusName(err));
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (err == CUBLAS_STATUS_INVALID_VALUE) return absl::InvalidArgumentError(msg);
  if (err == CUBLAS_STATUS_NOT_SUPPORTED || err == CUBLAS_STATUS_ARCH_MISMATCH) {
    return absl::UnimplementedError(msg);
  }
  return absl::InternalError(msg);
}

Status FromCudnn(cudnnStatus_t err, const char* what) {
  if (err == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s: %s", CallName(what), CudnnErrorText(err));
  if (err == CUDNN_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  if (err == CUDNN_STATUS_BAD_PARAM) return absl::InvalidArgumentError(msg);
  if (err == CUDNN_STATUS_NOT_SUPPORTED) return absl::UnimplementedError(msg);
  return absl::InternalError(msg);
}

Status FromNccl(ncclResult_t err, const char* what) {
  if (err == ncclSuccess) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s: %s", CallName(what), NcclErrorText(err));
  if (err == ncclInvalidArgument || err == ncclInvalidUsage) return absl::InvalidArgumentError(msg);
  if (err == ncclSystemError || err == ncclRemoteError) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

Status OutOfMemoryError(const char* what, int device, size_t requested, const std::string& extra) {
  size_t free_bytes = 0, total_bytes = 0;
  int prev = -1;
  cudaGetDevice(&prev);
  std::string mem = "free/total unknown";
  if (cudaSetDevice(device) == cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    mem = absl::StrFormat("free %s of %s", HumanBytes(free_bytes), HumanBytes(total_bytes));
  }
  if (prev >= 0) cudaSetDevice(prev);
  cudaGetLastError();  // the failed query must not stick to the next launch check
  return absl::ResourceExhaustedError(
      absl::StrFormat("%s: out of memory allocating %s (%d bytes) on GPU %d (%s%s%s)", what,
                      HumanBytes(requested), requested, device, mem, extra.empty() ? "" : "; ",
                      extra));
}

Status CheckLaunch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return absl::OkStatus();
  return FromCuda(err, (std::string("launch of ") + kernel).c_str());
}

}  // namespace pl::cuda
