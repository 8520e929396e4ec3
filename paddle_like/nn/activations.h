// Element-wise activation layers (any shape, float32): ReLU, Sigmoid, Tanh and GELU,
// plus the same ops as free functions for models that write their own forward.
// Each backward uses the saved output, so the input tensor is not kept alive, except
// GELU's, which needs the input.
//
// Thread-safety: see Module. Runs on the calling thread (memory-bound).
#ifndef PADDLE_LIKE_NN_ACTIVATIONS_H_
#define PADDLE_LIKE_NN_ACTIVATIONS_H_

#include "paddle_like/nn/module.h"

namespace pl {

// y = max(x, 0); the gradient at exactly 0 is taken as 0.
StatusOr<Variable> ApplyRelu(const Variable& x);
// y = 1 / (1 + exp(-x)), computed without overflow for large |x|.
StatusOr<Variable> ApplySigmoid(const Variable& x);
// y = tanh(x).
StatusOr<Variable> ApplyTanh(const Variable& x);
// y = 0.5 x (1 + erf(x / sqrt(2))), the exact form (torch's default, approximate="none").
StatusOr<Variable> ApplyGelu(const Variable& x);

class ReLU : public Layer {
 public:
  ReLU() : Layer("ReLU") {}
  StatusOr<Variable> Forward(const Variable& x) override { return ApplyRelu(x); }
};

class Sigmoid : public Layer {
 public:
  Sigmoid() : Layer("Sigmoid") {}
  StatusOr<Variable> Forward(const Variable& x) override { return ApplySigmoid(x); }
};

class Tanh : public Layer {
 public:
  Tanh() : Layer("Tanh") {}
  StatusOr<Variable> Forward(const Variable& x) override { return ApplyTanh(x); }
};

class GELU : public Layer {
 public:
  GELU() : Layer("GELU") {}
  StatusOr<Variable> Forward(const Variable& x) override { return ApplyGelu(x); }
};

}  // namespace pl

#endif  // PADDLE_LIKE_NN_ACTIVATIONS_H_
