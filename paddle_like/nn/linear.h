// Linear: y = x W + b.   x: (B, in)   W: (in, out)   b: (out)   y: (B, out)
// Parameters "w" (Glorot uniform) and "b" (zeros). Thread-safety: see Module.
#ifndef PADDLE_LIKE_NN_LINEAR_H_
#define PADDLE_LIKE_NN_LINEAR_H_

#include "paddle_like/nn/module.h"

namespace pl {

class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  StatusOr<Variable> Forward(const Variable& x) override;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const Variable& weight() const { return w_; }
  const Variable& bias() const { return b_; }

 private:
  int64_t in_, out_;
  Variable w_, b_;
};

// torch.nn.functional.linear: y = x W^T + b over given tensors, with torch's layout.
//   x: (..., in)   weight: (out, in)   bias: (out) or undefined   y: (..., out)
// Gradients go to all three. (The Linear layer above stores W as (in, out).)
StatusOr<Variable> LinearOp(const Variable& x, const Variable& weight, const Variable& bias);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_LINEAR_H_
