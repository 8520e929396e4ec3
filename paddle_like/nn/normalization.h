// Normalization: layer norm and batch norm, as layers with parameters and as ops over
// given tensors (torch.nn.functional.layer_norm / batch_norm). Float32 CPU.
// Legend: N batch, C channels, L the positions of one channel in one example (the
// product of the dims after C; 1 for an (N, C) input), M the normalised elements.
//
// LayerNorm over the last k dims (normalized_shape, k >= 1):
//   x: (..., *normalized_shape)   y = (x - mean) / sqrt(var + eps) * weight + bias
//   mean and the biased variance over the M = prod(normalized_shape) last elements.
//   Parameters "weight" (ones) and "bias" (zeros) of normalized_shape when affine.
//
// BatchNorm over the channels of x: (N, C), (N, C, L), (N, C, H, W) or any (N, C, ...):
//   training: mean and biased variance per channel over (N, L) normalise, and the running
//     statistics move: r = (1 - momentum) r + momentum s, with the unbiased variance
//     (as torch); more than one value per channel is required.
//   evaluation: running_mean and running_var normalise; the gradient is then affine.
//   Parameters "weight" (ones) and "bias" (zeros) of (C) when affine; buffers
//   "running_mean" (zeros) and "running_var" (ones) of (C) when tracking running stats
//   (without them every mode uses the batch statistics).
//
// Thread-safety: see Module; BatchNorm's forward in training mode writes its buffers.
#ifndef PADDLE_LIKE_NN_NORMALIZATION_H_
#define PADDLE_LIKE_NN_NORMALIZATION_H_

#include <string>

#include "paddle_like/nn/module.h"

namespace pl {

// `weight` and `bias` may be undefined (no affine step).
StatusOr<Variable> LayerNormOp(const Variable& x, const Shape& normalized_shape,
                               const Variable& weight, const Variable& bias, float eps = 1e-5f);

// `running_mean` and `running_var` (C) may be undefined only when `training`; when
// defined and training, they are updated in place. `weight`, `bias` (C) may be undefined.
StatusOr<Variable> BatchNormOp(const Variable& x, const Tensor& running_mean,
                               const Tensor& running_var, const Variable& weight,
                               const Variable& bias, bool training, float momentum = 0.1f,
                               float eps = 1e-5f);

class LayerNorm : public Layer {
 public:
  // normalized_shape must be non-empty with positive sizes; Forward reports a bad one.
  explicit LayerNorm(Shape normalized_shape, float eps = 1e-5f, bool elementwise_affine = true);
  StatusOr<Variable> Forward(const Variable& x) override;
  const Shape& normalized_shape() const { return shape_; }
  float eps() const { return eps_; }
  // "LayerNorm([4], eps=1e-05)", used in errors.
  std::string Describe() const;

 private:
  Shape shape_;
  float eps_;
  bool config_ok_;
  Variable weight_, bias_;
};

class BatchNorm : public Layer {
 public:
  // num_features (C) must be positive; Forward reports a bad one.
  explicit BatchNorm(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
                     bool affine = true, bool track_running_stats = true);
  StatusOr<Variable> Forward(const Variable& x) override;
  int64_t num_features() const { return c_; }
  float eps() const { return eps_; }
  float momentum() const { return momentum_; }
  // Undefined when not tracking running statistics.
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  // "BatchNorm(4, eps=1e-05, momentum=0.1)", used in errors.
  std::string Describe() const;

 private:
  int64_t c_;
  float eps_, momentum_;
  Variable weight_, bias_;
  Tensor running_mean_, running_var_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_NN_NORMALIZATION_H_
