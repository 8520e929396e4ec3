#include "cuda/dropout_ops.h"

#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/status.h"
#include "paddle_like/nn/init.h"

namespace pl::cuda {

using internal::CheckGpu;

StatusOr<DropoutMask> MakeDropoutMask(float p, uint64_t seed, uint64_t call) {
  if (!(p >= 0.0f && p < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("Dropout(p=", p, "): p must be in [0, 1)"));
  }
  DropoutMask m;
  // The constants and expressions of Dropout::Forward (paddle_like/nn/dropout.cc).
  m.stream_seed = MixSeed(MixSeed(seed, 0x64726f70ULL /* "drop" */), call);
  m.threshold = static_cast<uint32_t>(static_cast<double>(p) * (1u << 24));
  m.scale = 1.0f / (1.0f - p);
  return m;
}

Status DropoutForward(const DropoutMask& mask, const Tensor& x, const Tensor& y, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, "DropoutForward", "x"));
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, x.shape(), "DropoutForward", "y"));
  return FromCuda(kernels::DropoutForward(x.f32(), y.f32(), x.numel(), mask.stream_seed, mask.threshold,
                                          mask.scale, stream),
                  "DropoutForward");
}

Status DropoutBackward(const DropoutMask& mask, const Tensor& gy, const Tensor& gx, bool accumulate,
                       cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, "DropoutBackward", "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(gx, DType::kFloat32, gy.shape(), "DropoutBackward", "gx"));
  return FromCuda(kernels::DropoutBackward(gy.f32(), gx.f32(), gy.numel(), mask.stream_seed, mask.threshold,
                                           mask.scale, accumulate, stream),
                  "DropoutBackward");
}

}  // namespace pl::cuda
