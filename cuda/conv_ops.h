// 2-D convolution on the GPU through cuDNN, NCHW, cross-correlation — the same
// operation and layouts as paddle_like/nn/conv2d.h:
//   x: (N, C, H, W)   w: (O, C, kh, kw)   b: (O)   y: (N, O, Ho, Wo)
//   Ho = (H + 2*pad - kh) / stride + 1, Wo likewise.
// A ConvPlan fixes one such shape: it holds the cuDNN descriptors and the algorithms
// chosen for forward, backward-data and backward-filter (cuDNN's heuristics, the
// fastest deterministic one whose workspace fits `max_workspace_bytes`, else the
// fastest that fits), so a training loop pays for the choice once per shape.
// Workspaces come from the caching allocator at each call.
//
// Thread-safety: a plan may be shared by threads; each call takes the caller's context.
#ifndef PADDLE_LIKE_CUDA_CONV_OPS_H_
#define PADDLE_LIKE_CUDA_CONV_OPS_H_

#include <memory>
#include <string>

#include "cuda/context.h"
#include "paddle_like/core/tensor.h"

namespace pl::cuda {

struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t o = 0, kh = 0, kw = 0;       // filters
  int64_t stride = 1, pad = 0;
  int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
  Shape x_shape() const { return {n, c, h, w}; }
  Shape w_shape() const { return {o, c, kh, kw}; }
  Shape y_shape() const { return {n, o, out_h(), out_w()}; }
  std::string ToString() const;
};

class ConvPlan {
 public:
  // INVALID_ARGUMENT for a shape with no output or bad sizes; cuDNN errors otherwise.
  static StatusOr<std::unique_ptr<ConvPlan>> Create(const GpuContext& ctx, const ConvShape& shape,
                                                    size_t max_workspace_bytes = size_t{256} << 20);
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  const ConvShape& shape() const { return shape_; }
  // y = conv(x, w) (+ b); b may be undefined.
  Status Forward(const GpuContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                 const Tensor& y) const;
  // dx = conv_transpose(gy, w), written.
  Status BackwardData(const GpuContext& ctx, const Tensor& w, const Tensor& gy, const Tensor& dx) const;
  // dw (+)= correlation of x with gy.
  Status BackwardFilter(const GpuContext& ctx, const Tensor& x, const Tensor& gy, const Tensor& dw,
                        bool accumulate) const;
  // db (+)= sum of gy over N, Ho, Wo.
  Status BackwardBias(const GpuContext& ctx, const Tensor& gy, const Tensor& db, bool accumulate) const;
  // "fwd=IMPLICIT_PRECOMP_GEMM bwd_data=1 bwd_filter=1", for logs and benchmarks.
  std::string AlgorithmString() const;

 private:
  struct Impl;
  explicit ConvPlan(std::unique_ptr<Impl> impl, const ConvShape& shape);
  std::unique_ptr<Impl> impl_;
  ConvShape shape_;
};

}  // namespace pl::cuda

#endif  // PADDLE_LIKE_CUDA_CONV_OPS_H_
