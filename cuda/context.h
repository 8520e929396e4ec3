// GpuContext: what the GPU ops of one device need — the device id, one stream, and
// cuBLAS and cuDNN handles bound to that stream. Every op queued through one context
// runs in order on its stream, which is also what makes the caching allocator's
// reuse of freed blocks safe (see allocator.h).
//
// Thread-safety: a context is used by one thread at a time (cuBLAS/cuDNN handles are
// not shareable across threads); make one per thread or per model replica.
#ifndef PADDLE_LIKE_CUDA_CONTEXT_H_
#define PADDLE_LIKE_CUDA_CONTEXT_H_

#include <memory>

#include <cublas_v2.h>
#include <cudnn.h>

#include "cuda/device.h"

namespace pl::cuda {

struct ContextOptions {
  // Lets cuBLAS/cuDNN use TF32 tensor cores for float32 GEMMs and convolutions
  // (about 8x the FP32 rate on A100/H100, 10-bit mantissa products). Off by default
  // so results match the CPU implementation to float32 rounding.
  bool allow_tf32 = false;
};

class GpuContext {
 public:
  // UNAVAILABLE without a GPU, INVALID_ARGUMENT for a device that does not exist.
  static StatusOr<std::unique_ptr<GpuContext>> Create(int device, ContextOptions options = {});
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return stream_.device(); }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  bool allow_tf32() const { return options_.allow_tf32; }
  // Waits for the stream; surfaces errors of earlier asynchronous work.
  Status Synchronize() const { return stream_.Synchronize(); }

 private:
  GpuContext(Stream stream, ContextOptions options) : stream_(std::move(stream)), options_(options) {}
  Stream stream_;
  ContextOptions options_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_CONTEXT_H_
