#include "cuda/conv_ops.h"

#include <climits>
#include <vector>

#include "absl/strings/str_format.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/dynamic_api.h"
#include "cuda/kernels.h"
#include "cuda/status.h"

namespace pl::cuda {

using internal::CheckGpu;

struct ConvPlan::Impl {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;

  ~Impl() {
    if (x) dyn::cudnnDestroyTensorDescriptor(x);
    if (y) dyn::cudnnDestroyTensorDescriptor(y);
    if (w) dyn::cudnnDestroyFilterDescriptor(w);
    if (conv) dyn::cudnnDestroyConvolutionDescriptor(conv);
  }
};

namespace {

// Picks from cuDNN's heuristic ranking (fastest first): the first deterministic
// algorithm whose workspace fits, else the first that fits.
template <typename Perf, typename Algo>
StatusOr<std::pair<Algo, size_t>> Choose(const Perf* perf, int count, size_t max_ws, const char* what,
                                         const std::string& shape) {
  int fallback = -1;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > max_ws) continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC) return std::make_pair(perf[i].algo, perf[i].memory);
    if (fallback < 0) fallback = i;
  }
  if (fallback >= 0) return std::make_pair(perf[fallback].algo, perf[fallback].memory);
  return absl::UnimplementedError(absl::StrFormat(
      "%s: cuDNN offers no algorithm for %s within a %s workspace", what, shape, HumanBytes(max_ws)));
}

// Workspace for one call, returned to the cache when the tensor goes away (after the
// call is queued: stream order keeps the reuse safe, see allocator.h).
StatusOr<Tensor> Workspace(const GpuContext& ctx, size_t bytes) {
  if (bytes == 0) return Tensor();
  return AllocateDeviceTensor({static_cast<int64_t>((bytes + 3) / 4)}, DType::kFloat32, ctx.device());
}

}  // namespace

std::string ConvShape::ToString() const {
  return absl::StrFormat("conv x[%d, %d, %d, %d] w[%d, %d, %d, %d] stride %d pad %d", n, c, h, w, o, c,
                         kh, kw, stride, pad);
}

ConvPlan::ConvPlan(std::unique_ptr<Impl> impl, const ConvShape& shape)
    : impl_(std::move(impl)), shape_(shape) {}
ConvPlan::~ConvPlan() = default;

StatusOr<std::unique_ptr<ConvPlan>> ConvPlan::Create(const GpuContext& ctx, const ConvShape& s,
                                                     size_t max_ws) {
  const std::string desc = s.ToString();
  for (int64_t v : {s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.stride, s.pad}) {
    if (v < 0 || v > INT_MAX) return absl::InvalidArgumentError("ConvPlan: size out of range in " + desc);
  }
  if (s.n == 0 || s.c == 0 || s.o == 0 || s.kh == 0 || s.kw == 0 || s.stride == 0 || s.out_h() <= 0 ||
      s.out_w() <= 0 || s.h + 2 * s.pad < s.kh || s.w + 2 * s.pad < s.kw) {
    return absl::InvalidArgumentError("ConvPlan: no output for " + desc);
  }
  DeviceGuard guard(ctx.device());
  PL_RETURN_IF_ERROR(guard.status());
  auto impl = std::make_unique<Impl>();
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateTensorDescriptor(&impl->x));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateTensorDescriptor(&impl->y));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateFilterDescriptor(&impl->w));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnCreateConvolutionDescriptor(&impl->conv));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetTensor4dDescriptor(impl->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i32(s.n),
                                                           i32(s.c), i32(s.h), i32(s.w)));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetFilter4dDescriptor(impl->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i32(s.o),
                                                           i32(s.c), i32(s.kh), i32(s.kw)));
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetConvolution2dDescriptor(impl->conv, i32(s.pad), i32(s.pad), i32(s.stride),
                                                                i32(s.stride), 1, 1, CUDNN_CROSS_CORRELATION,
                                                                CUDNN_DATA_FLOAT));
  // FMA math forbids TF32 (cuDNN's default allows it), so results match the CPU.
  PL_CUDNN_RETURN_IF_ERROR(
      dyn::cudnnSetConvolutionMathType(impl->conv, ctx.allow_tf32() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int n = 0, c = 0, h = 0, w = 0;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnGetConvolution2dForwardOutputDim(impl->conv, impl->x, impl->w, &n, &c, &h, &w));
  if (n != s.n || c != s.o || h != s.out_h() || w != s.out_w()) {
    return absl::InternalError(absl::StrFormat("ConvPlan: cuDNN output [%d, %d, %d, %d] differs from %s",
                                               n, c, h, w, ShapeToString(s.y_shape())));
  }
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnSetTensor4dDescriptor(impl->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));

  cudnnHandle_t handle = ctx.cudnn();
  {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnGetConvolutionForwardAlgorithm_v7(
        handle, impl->x, impl->w, impl->conv, impl->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    PL_ASSIGN_OR_RETURN(auto choice, (Choose<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
                                         perf, count, max_ws, "conv forward", desc)));
    impl->fwd_algo = choice.first;
    impl->fwd_ws = choice.second;
  }
  {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, impl->w, impl->y, impl->conv, impl->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    PL_ASSIGN_OR_RETURN(auto choice, (Choose<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
                                         perf, count, max_ws, "conv backward-data", desc)));
    impl->bwd_data_algo = choice.first;
    impl->bwd_data_ws = choice.second;
  }
  {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, impl->x, impl->y, impl->conv, impl->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    PL_ASSIGN_OR_RETURN(auto choice,
                        (Choose<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
                            perf, count, max_ws, "conv backward-filter", desc)));
    impl->bwd_filter_algo = choice.first;
    impl->bwd_filter_ws = choice.second;
  }
  return std::unique_ptr<ConvPlan>(new ConvPlan(std::move(impl), s));
}

std::string ConvPlan::AlgorithmString() const {
  return absl::StrFormat("fwd=%d bwd_data=%d bwd_filter=%d (workspace %s/%s/%s)",
                         static_cast<int>(impl_->fwd_algo), static_cast<int>(impl_->bwd_data_algo),
                         static_cast<int>(impl_->bwd_filter_algo), HumanBytes(impl_->fwd_ws),
                         HumanBytes(impl_->bwd_data_ws), HumanBytes(impl_->bwd_filter_ws));
}

Status ConvPlan::Forward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                         const Tensor& y) const {
  const std::string op = "ConvForward(" + shape_.ToString() + ")";
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, shape_.x_shape(), op, "x"));
  PL_RETURN_IF_ERROR(CheckGpu(w, DType::kFloat32, shape_.w_shape(), op, "w"));
  PL_RETURN_IF_ERROR(CheckGpu(y, DType::kFloat32, shape_.y_shape(), op, "y"));
  if (b.defined()) PL_RETURN_IF_ERROR(CheckGpu(b, DType::kFloat32, {shape_.o}, op, "b"));
  PL_ASSIGN_OR_RETURN(Tensor ws, Workspace(ctx, impl_->fwd_ws));
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnConvolutionForward(ctx.cudnn(), &one, impl_->x, x.f32(), impl_->w, w.f32(),
                                                        impl_->conv, impl_->fwd_algo, ws.raw_data(), impl_->fwd_ws,
                                                        &zero, impl_->y, y.f32()));
  if (b.defined()) {
    PL_RETURN_IF_ERROR(FromCuda(kernels::BiasAdd(y.f32(), b.f32(), shape_.n, shape_.o,
                                                 shape_.out_h() * shape_.out_w(), ctx.stream()),
                                "BiasAdd"));
  }
  return absl::OkStatus();
}

Status ConvPlan::BackwardData(const GpuContext& ctx, const Tensor& w, const Tensor& gy,
                              const Tensor& dx) const {
  const std::string op = "ConvBackwardData(" + shape_.ToString() + ")";
  PL_RETURN_IF_ERROR(CheckGpu(w, DType::kFloat32, shape_.w_shape(), op, "w"));
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, shape_.y_shape(), op, "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(dx, DType::kFloat32, shape_.x_shape(), op, "dx"));
  PL_ASSIGN_OR_RETURN(Tensor ws, Workspace(ctx, impl_->bwd_data_ws));
  const float one = 1.0f, zero = 0.0f;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnConvolutionBackwardData(ctx.cudnn(), &one, impl_->w, w.f32(), impl_->y, gy.f32(),
                                                             impl_->conv, impl_->bwd_data_algo, ws.raw_data(),
                                                             impl_->bwd_data_ws, &zero, impl_->x, dx.f32()));
  return absl::OkStatus();
}

Status ConvPlan::BackwardFilter(const GpuContext& ctx, const Tensor& x, const Tensor& gy,
                                const Tensor& dw, bool accumulate) const {
  const std::string op = "ConvBackwardFilter(" + shape_.ToString() + ")";
  PL_RETURN_IF_ERROR(CheckGpu(x, DType::kFloat32, shape_.x_shape(), op, "x"));
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, shape_.y_shape(), op, "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(dw, DType::kFloat32, shape_.w_shape(), op, "dw"));
  PL_ASSIGN_OR_RETURN(Tensor ws, Workspace(ctx, impl_->bwd_filter_ws));
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  PL_CUDNN_RETURN_IF_ERROR(dyn::cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, impl_->x, x.f32(), impl_->y, gy.f32(),
                                                               impl_->conv, impl_->bwd_filter_algo, ws.raw_data(),
                                                               impl_->bwd_filter_ws, &beta, impl_->w, dw.f32()));
  return absl::OkStatus();
}

Status ConvPlan::BackwardBias(const GpuContext& ctx, const Tensor& gy, const Tensor& db,
                              bool accumulate) const {
  const std::string op = "ConvBackwardBias(" + shape_.ToString() + ")";
  PL_RETURN_IF_ERROR(CheckGpu(gy, DType::kFloat32, shape_.y_shape(), op, "gy"));
  PL_RETURN_IF_ERROR(CheckGpu(db, DType::kFloat32, {shape_.o}, op, "db"));
  return FromCuda(kernels::BiasGrad(gy.f32(), db.f32(), shape_.n, shape_.o,
                                    shape_.out_h() * shape_.out_w(), accumulate, ctx.stream()),
                  "BiasGrad");
}

}  // namespace pl::cuda
