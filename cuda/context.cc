#include "cuda/context.h"

#include "cuda/dynamic_api.h"
#include "cuda/status.h"

namespace pl::cuda {

StatusOr<std::unique_ptr<GpuContext>> GpuContext::Create(int device, ContextOptions options) {
  PL_RETURN_IF_ERROR(LoadCudaLibrary(CudaLibrary::kCublas));
  PL_RETURN_IF_ERROR(LoadCudaLibrary(CudaLibrary::kCudnn));
  PL_ASSIGN_OR_RETURN(Stream stream, Stream::Create(device));
  DeviceGuard guard(device);
  PL_RETURN_IF_ERROR(guard.status());
  std::unique_ptr<GpuContext> ctx(new GpuContext(std::move(stream), options));
  PL_CUBLAS_RETURN_IF_ERROR(dyn::cublasCreate(&ctx->cublas_));
  PL_CUBLAS_RETURN_IF_ERROR(dyn::cublasSetStream(ctx->cublas_, ctx->stream()));
  PL_CUBLAS_RETURN_IF_ERROR(
      dyn::cublasSetMathMode(ctx->cublas_, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreate(&ctx->cudnn_));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetStream(ctx->cudnn_, ctx->stream()));
  return ctx;
}

GpuContext::~GpuContext() {
  DeviceGuard guard(device());
  if (cudnn_ != nullptr) dyn::cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) dyn::cublasDestroy(cublas_);
}

}  // namespace pl::cuda
