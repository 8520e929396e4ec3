#include "cuda/activation_ops.h"

#include "cuda/check.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

namespace {
// (outer, C, inner) view of a tensor with channels at dim 1.
Status ChannelView(const Tensor& t, const char* op, int64_t* outer, int64_t* c, int64_t* inner) {
  if (t.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expects (N, C, ...), got ", t.ShapeString()));
  }
  *outer = t.dim(0);
  *c = t.dim(1);
  *inner = *outer * *c == 0 ? 0 : t.numel() / (*outer * *c);
  return absl::OkStatus();
}
}  // namespace

const char* ActivationName(Activation act) {
  switch (act) {
    case Activation::kRelu: return "ReLU";
    case Activation::kSigmoid: return "Sigmoid";
    case Activation::kTanh: return "Tanh";
  }
  return "unknown";
}

Status ActivationForward(Activation act, const Tensor& x, const Tensor& y, cudaStream_t stream) {
  const std::string op = absl::StrCat(ActivationName(act), "Forward");
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, op, "x"));
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, x.shape(), op, "y"));
  return FromCuda(kernels::ActivationForward(act, x.f32(), y.f32(), x.numel(), stream), op.c_str());
}

Status ActivationBackward(Activation act, const Tensor& y, const Tensor& gy, const Tensor& gx,
                          bool accumulate, cudaStream_t stream) {
  const std::string op = absl::StrCat(ActivationName(act), "Backward");
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, op, "y"));
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, y.shape(), op, "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(gx, DType::kFloat32, y.shape(), op, "gx"));
  return FromCuda(kernels::ActivationBackward(act, y.f32(), gy.f32(), gx.f32(), y.numel(), accumulate, stream),
                  op.c_str());
}

Status BiasAdd(const Tensor& y, const Tensor& b, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, "BiasAdd", "y"));
  int64_t outer, c, inner;
  PL_RETURN_IF_ERROR(ChannelView(y, "BiasAdd", &outer, &c, &inner));
  PL_RETURN_IF_ERROR(CheckGpu(b, DType::kFloat32, {c}, "BiasAdd", "b"));
  return FromCuda(kernels::BiasAdd(y.f32(), b.f32(), outer, c, inner, stream), "BiasAdd");
}

Status BiasGrad(const Tensor& gy, const Tensor& db, bool accumulate, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, "BiasGrad", "gy"));
  int64_t outer, c, inner;
  PL_RETURN_IF_ERROR(ChannelView(gy, "BiasGrad", &outer, &c, &inner));
  PL_RETURN_IF_ERROR(CheckGpu(db, DType::kFloat32, {c}, "BiasGrad", "db"));
  return FromCuda(kernels::BiasGrad(gy.f32(), db.f32(), outer, c, inner, accumulate, stream), "BiasGrad");
}

Status Scale(const Tensor& x, float alpha, cudaStream_t stream) {
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, "Scale", "x"));
  return FromCuda(kernels::Scale(x.f32(), x.numel(), alpha, stream), "Scale");
}

}  // namespace pl::cuda
