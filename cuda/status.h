// Turns the status codes of the CUDA runtime, cuBLAS, cuDNN and NCCL into pl::Status,
// naming the call that failed ("cublasSgemm: CUBLAS_STATUS_INVALID_VALUE"), so a GPU
// error reads like any other error of the library and never aborts the process.
//
//   PL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(...));   // the message names the expression
//   PL_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(...));
//
// An out-of-memory from the runtime becomes RESOURCE_EXHAUSTED; the allocator adds
// the requested size and the device's free/total memory (OutOfMemoryError).
// Other runtime errors are INTERNAL, except "no device"/"driver insufficient", which
// are UNAVAILABLE (a machine without a usable GPU is an environment condition).
//
// Thread-safety: all functions are thread-safe.
#ifndef PADDLE_LIKE_CUDA_STATUS_H_
#define PADDLE_LIKE_CUDA_STATUS_H_

#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "paddle_like/core/status.h"

namespace pl::cuda {

// Each returns OK for the success code, else an error "<what>: <CODE_NAME> (<text>)".
Status FromCuda(cudaError_t err, const char* what);
Status FromCublas(cublasStatus_t err, const char* what);
Status FromCudnn(cudnnStatus_t err, const char* what);
Status FromNccl(ncclResult_t err, const char* what);

const char* CublasStatusName(cublasStatus_t err);

// RESOURCE_EXHAUSTED: "<what>: out of memory allocating <requested> on GPU <device>
// (free <f> of <total>; <extra>)", sizes in human units.
Status OutOfMemoryError(const char* what, int device, size_t requested, const std::string& extra);
// "1.5 GiB", "512 B".
std::string HumanBytes(size_t bytes);

// Checks a kernel launch (cudaGetLastError), naming the kernel.
Status CheckLaunch(const char* kernel);

}  // namespace pl::cuda

#define PL_CUDA_RETURN_IF_ERROR(expr) PL_RETURN_IF_ERROR(::pl::cuda::FromCuda((expr), #expr))
#define PL_CUBLAS_RETURN_IF_ERROR(expr) PL_RETURN_IF_ERROR(::pl::cuda::FromCublas((expr), #expr))
#define PL_CUDNN_RETURN_IF_ERROR(expr) PL_RETURN_IF_ERROR(::pl::cuda::FromCudnn((expr), #expr))
#define PL_NCCL_RETURN_IF_ERROR(expr) PL_RETURN_IF_ERROR(::pl::cuda::FromNccl((expr), #expr))

#endif  // PADDLE_LIKE_CUDA_STATUS_H_
