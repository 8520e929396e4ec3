#include "cuda/loss_ops.h"

#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

namespace {

// Sums per-row losses and flags on the device and brings the three totals back.
StatusOr<LossResult> Finish(const Tensor& row_loss, const Tensor& row_correct, int64_t rows,
                            int device, cudaStream_t stream, const char* op) {
  PL_ASSIGN_OR_RETURN(Tensor out, AllocateDeviceTensor({3}, DType::kFloat32, device));
  PL_RETURN_IF_ERROR(FromCuda(kernels::ReduceLossStats(row_loss.f32(), row_correct.f32(), rows,
                                                       rows > 0 ? 1.0f / rows : 0.0f, out.f32(), stream),
                              "ReduceLossStats"));
  float host[3];
  PL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, out.f32(), sizeof(host), cudaMemcpyDeviceToHost, stream));
  PL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (host[2] > 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", static_cast<int64_t>(host[2]), " of ", rows,
                                                    " labels are outside the valid range"));
  }
  return LossResult{host[0], static_cast<int64_t>(host[1])};
}

}  // namespace

StatusOr<LossResult> SoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels, const Tensor& grad,
                                         cudaStream_t stream, float grad_scale) {
  const char* op = "SoftmaxCrossEntropy";
  PL_RETURN_IF_ERROR(CheckGpu(logits, DType::kFloat32, op, "logits"));
  if (logits.rank() != 2 || logits.dim(1) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": logits must be (B, K), got ", logits.ShapeString()));
  }
  const int64_t rows = logits.dim(0), classes = logits.dim(1);
  PL_RETURN_IF_ERROR(CheckGpu(labels, DType::kInt64, {rows}, op, "labels"));
  if (grad.defined()) PL_RETURN_IF_ERROR(CheckGpu(grad, DType::kFloat32, logits.shape(), op, "grad"));
  if (rows == 0) return LossResult{};
  PL_ASSIGN_OR_RETURN(int device, DeviceOf(logits));
  PL_ASSIGN_OR_RETURN(Tensor row_loss, AllocateDeviceTensor({rows}, DType::kFloat32, device));
  PL_ASSIGN_OR_RETURN(Tensor row_correct, AllocateDeviceTensor({rows}, DType::kFloat32, device));
  PL_RETURN_IF_ERROR(FromCuda(
      kernels::SoftmaxCrossEntropy(logits.f32(), labels.i64(), rows, classes, grad_scale / rows,
                                   grad.defined() ? grad.f32() : nullptr, row_loss.f32(), row_correct.f32(),
                                   stream),
      op));
  return Finish(row_loss, row_correct, rows, device, stream, op);
}

StatusOr<LossResult> SigmoidBinaryCrossEntropy(const Tensor& logits, const Tensor& labels,
                                               const Tensor& grad, cudaStream_t stream, float grad_scale) {
  const char* op = "SigmoidBinaryCrossEntropy";
  PL_RETURN_IF_ERROR(CheckGpu(logits, DType::kFloat32, op, "logits"));
  const bool shape_ok = logits.rank() == 1 || (logits.rank() == 2 && logits.dim(1) == 1);
  if (!shape_ok) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": logits must be (B) or (B, 1), got ",
                                                   logits.ShapeString()));
  }
  const int64_t rows = logits.dim(0);
  PL_RETURN_IF_ERROR(CheckGpu(labels, DType::kFloat32, {rows}, op, "labels"));
  if (grad.defined()) PL_RETURN_IF_ERROR(CheckGpu(grad, DType::kFloat32, logits.shape(), op, "grad"));
  if (rows == 0) return LossResult{};
  PL_ASSIGN_OR_RETURN(int device, DeviceOf(logits));
  PL_ASSIGN_OR_RETURN(Tensor row_loss, AllocateDeviceTensor({rows}, DType::kFloat32, device));
  PL_ASSIGN_OR_RETURN(Tensor row_correct, AllocateDeviceTensor({rows}, DType::kFloat32, device));
  PL_RETURN_IF_ERROR(FromCuda(
      kernels::SigmoidBinaryCrossEntropy(logits.f32(), labels.f32(), rows, grad_scale / rows,
                                         grad.defined() ? grad.f32() : nullptr, row_loss.f32(),
                                         row_correct.f32(), stream),
      op));
  return Finish(row_loss, row_correct, rows, device, stream, op);
}

}  // namespace pl::cuda
