// Conv2D: 2-D convolution (cross-correlation, as in every DL framework) over NCHW.
//   x: (N, C, H, W)   w: (O, C, kh, kw)   b: (O)   y: (N, O, Ho, Wo)
//   Ho = (H + 2*padding - kh) / stride + 1, Wo likewise (floor).
// Parameters "w" (He uniform, fan_in = C*kh*kw) and "b" (zeros).
// CPU implementation: im2col + one Eigen GEMM per example, examples spread over
// OpenMP threads (dynamic schedule, so a descheduled thread on a shared machine does
// not hold the batch up), each thread with its own column buffer. The weight
// gradient is summed per fixed chunk of the batch and the chunks added in order, so
// it is race-free and bit-identical for any thread count. Backward recomputes the
// columns instead of keeping them (N*C*kh*kw*Ho*Wo floats): a cheap copy saved
// against a lot of activation memory.
//
// Thread-safety: see Module.
#ifndef PADDLE_LIKE_NN_CONV2D_H_
#define PADDLE_LIKE_NN_CONV2D_H_

#include <string>

#include "paddle_like/nn/module.h"

namespace pl {

class Conv2D : public Layer {
 public:
  // Sizes must be positive and padding non-negative; Forward reports a bad config.
  Conv2D(int64_t in_channels, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
         int64_t stride = 1, int64_t padding = 0, bool bias = true);
  StatusOr<Variable> Forward(const Variable& x) override;

  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  int64_t kernel_h() const { return kh_; }
  int64_t kernel_w() const { return kw_; }
  int64_t stride() const { return stride_; }
  int64_t padding() const { return pad_; }
  const Variable& weight() const { return w_; }
  const Variable& bias() const { return b_; }
  // "Conv2D(in=1, out=32, kernel=5x5, stride=1, padding=2)", used in errors.
  std::string Describe() const;

 private:
  int64_t in_, out_, kh_, kw_, stride_, pad_;
  bool config_ok_;
  Variable w_, b_;
};

// torch.nn.functional.conv2d over given tensors (the same computation as the layer):
//   x (N, C, H, W), weight (O, C, kh, kw), bias (O) or undefined; square stride and
//   symmetric padding. Gradients go to all three.
StatusOr<Variable> Conv2dOp(const Variable& x, const Variable& weight, const Variable& bias,
                            int64_t stride = 1, int64_t padding = 0);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_CONV2D_H_
