#include "cuda/context.h"

#include "cuda/status.h"

namespace pl::cuda {

StatusOr<std::unique_ptr<GpuContext>> GpuContext::Create(int device, ContextOptions options) {
  PL_ASSIGN_OR_RETURN(Stream stream, Stream::Create(device));
  DeviceGuard guard(device);
  PL_RETURN_IF_ERROR(guard.status());
  std::unique_ptr<GpuContext> ctx(new GpuContext(std::move(stream), options));
  PL_CUBLAS_RETURN_IF_ERROR(cublasCreate(&ctx->cublas_));
  PL_CUBLAS_RETURN_IF_ERROR(cublasSetStream(ctx->cublas_, ctx->stream()));
  PL_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(
      ctx->cublas_, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  PL_CUDNN_RETURN_IF_ERROR(cudnnCreate(&ctx->cudnn_));
  PL_CUDNN_RETURN_IF_ERROR(cudnnSetStream(ctx->cudnn_, ctx->stream()));
  return ctx;
}

GpuContext::~GpuContext() {
  DeviceGuard guard(device());
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

}  // namespace pl::cuda
