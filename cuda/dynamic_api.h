// The cuBLAS, cuDNN and NCCL functions the GPU path calls, reached through the
// libraries cuda_libraries.h opens at run time. Call them as dyn::cublasGemmEx(...):
// the same name and arguments as the library's header, with the same result.
//
// Adding a call to a function not yet listed: add its name to the library's list
// below (the real symbol's name: cublasCreate_v2, not the cublasCreate macro). A
// library whose file lacks any listed function is refused when it is loaded, so a
// call never finds a missing symbol. The first call opens the library; where it could
// not be opened, every function returns the library's "not initialized" code instead
// of calling anything (GpuContext and NcclCommunicator check LoadCudaLibrary first, so
// their errors say why).
//
// Thread-safety: as the library's own functions.
#ifndef PADDLE_LIKE_CUDA_DYNAMIC_API_H_
#define PADDLE_LIKE_CUDA_DYNAMIC_API_H_

#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <utility>

#include "cuda/cuda_libraries.h"

// cublasGemmEx is listed apart: C++ code also sees an inline overload of it (taking a
// cudaDataType compute type), so its wrapper names the C signature the library exports.
#define PL_CUBLAS_UNIQUE_FUNCTIONS(X) \
  X(cublasCreate_v2)                  \
  X(cublasDestroy_v2)                 \
  X(cublasSetStream_v2)               \
  X(cublasSetMathMode)                \
  X(cublasGetProperty)
#define PL_CUBLAS_FUNCTIONS(X) PL_CUBLAS_UNIQUE_FUNCTIONS(X) X(cublasGemmEx)

#define PL_CUDNN_FUNCTIONS(X)                      \
  X(cudnnGetVersion)                               \
  X(cudnnCreate)                                   \
  X(cudnnDestroy)                                  \
  X(cudnnSetStream)                                \
  X(cudnnGetErrorString)                           \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnGetConvolution2dForwardOutputDim)         \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnConvolutionBackwardFilter)                \
  X(cudnnCreatePoolingDescriptor)                  \
  X(cudnnDestroyPoolingDescriptor)                 \
  X(cudnnSetPooling2dDescriptor)                   \
  X(cudnnPoolingForward)                           \
  X(cudnnPoolingBackward)

#define PL_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)          \
  X(ncclCommInitAll)         \
  X(ncclCommDestroy)         \
  X(ncclAllReduce)           \
  X(ncclGroupStart)          \
  X(ncclGroupEnd)            \
  X(ncclGetErrorString)

namespace pl::cuda {
namespace internal {

#define PL_CUDA_FUNCTION_ENUM_ENTRY(name) name,
enum class CublasFunction : int { PL_CUBLAS_FUNCTIONS(PL_CUDA_FUNCTION_ENUM_ENTRY) kCount };
enum class CudnnFunction : int { PL_CUDNN_FUNCTIONS(PL_CUDA_FUNCTION_ENUM_ENTRY) kCount };
enum class NcclFunction : int { PL_NCCL_FUNCTIONS(PL_CUDA_FUNCTION_ENUM_ENTRY) kCount };
#undef PL_CUDA_FUNCTION_ENUM_ENTRY

// What a function returns when its library is not loaded.
template <typename R>
R NotLoaded();
template <>
inline cublasStatus_t NotLoaded<cublasStatus_t>() {
  return CUBLAS_STATUS_NOT_INITIALIZED;
}
template <>
inline cudnnStatus_t NotLoaded<cudnnStatus_t>() {
  return CUDNN_STATUS_NOT_INITIALIZED;
}
template <>
inline ncclResult_t NotLoaded<ncclResult_t>() {
  return ncclInvalidUsage;
}
template <>
inline size_t NotLoaded<size_t>() {
  return 0;
}
template <>
inline const char* NotLoaded<const char*>() {
  return "(the library is not loaded)";
}

}  // namespace internal

namespace dyn {

#define PL_CUDA_DYNAMIC_FUNCTION(library, function_enum, name)                                       \
  template <typename... Args>                                                                        \
  inline auto name(Args&&... args)->decltype(::name(std::forward<Args>(args)...)) {                  \
    using Result = decltype(::name(std::forward<Args>(args)...));                                    \
    void* symbol = ::pl::cuda::internal::CudaSymbol(library, static_cast<int>(function_enum::name)); \
    if (symbol == nullptr) return ::pl::cuda::internal::NotLoaded<Result>();                         \
    return reinterpret_cast<decltype(&::name)>(symbol)(std::forward<Args>(args)...);                 \
  }
#define PL_CUBLAS_WRAPPER(name) PL_CUDA_DYNAMIC_FUNCTION(CudaLibrary::kCublas, internal::CublasFunction, name)
#define PL_CUDNN_WRAPPER(name) PL_CUDA_DYNAMIC_FUNCTION(CudaLibrary::kCudnn, internal::CudnnFunction, name)
#define PL_NCCL_WRAPPER(name) PL_CUDA_DYNAMIC_FUNCTION(CudaLibrary::kNccl, internal::NcclFunction, name)
PL_CUBLAS_UNIQUE_FUNCTIONS(PL_CUBLAS_WRAPPER)
PL_CUDNN_FUNCTIONS(PL_CUDNN_WRAPPER)
PL_NCCL_FUNCTIONS(PL_NCCL_WRAPPER)
#undef PL_CUBLAS_WRAPPER
#undef PL_CUDNN_WRAPPER
#undef PL_NCCL_WRAPPER
#undef PL_CUDA_DYNAMIC_FUNCTION

inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* a, cudaDataType a_type, int lda,
                                   const void* b, cudaDataType b_type, int ldb, const void* beta, void* c,
                                   cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                                   cublasGemmAlgo_t algo) {
  using Function = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                      const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                                      void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  void* symbol = internal::CudaSymbol(CudaLibrary::kCublas, static_cast<int>(internal::CublasFunction::cublasGemmEx));
  if (symbol == nullptr) return internal::NotLoaded<cublasStatus_t>();
  return reinterpret_cast<Function>(symbol)(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb,
                                            beta, c, c_type, ldc, compute_type, algo);
}

}  // namespace dyn
}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_DYNAMIC_API_H_
