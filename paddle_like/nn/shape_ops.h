// Shape layers and ops: Flatten, Reshape, Concat and Transpose. Flatten and Reshape
// return a view sharing the input's storage (no copy); their backward adds the
// gradient back in the input's shape. Concat and Transpose copy.
//
// Thread-safety: see Module.
#ifndef PADDLE_LIKE_NN_SHAPE_OPS_H_
#define PADDLE_LIKE_NN_SHAPE_OPS_H_

#include <vector>

#include "paddle_like/nn/module.h"

namespace pl {

// (N, d1, d2, ...) -> (N, d1*d2*...). A rank-1 input (N) becomes (N, 1).
class Flatten : public Layer {
 public:
  Flatten() : Layer("Flatten") {}
  StatusOr<Variable> Forward(const Variable& x) override;
};

// (N, ...) -> (N, shape...): `shape` is the per-example shape, without the batch
// dimension, which is kept as the input has it; one entry may be -1 (inferred).
// E.g. Reshape({1, 28, 28}) turns (N, 784) into (N, 1, 28, 28).
class Reshape : public Layer {
 public:
  explicit Reshape(Shape shape) : Layer("Reshape"), shape_(std::move(shape)) {}
  StatusOr<Variable> Forward(const Variable& x) override;
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
};

// Joins float32 tensors along `axis` (negative counts from the end). Every input has
// the same rank and the same size in every other dimension.
StatusOr<Variable> Concat(const std::vector<Variable>& xs, int axis);

// Swaps dimensions dim0 and dim1 (negative counts from the end) of a tensor of any
// rank into a new contiguous tensor (torch.transpose, materialised); backward
// transposes the gradient back. Takes float32 or int64 (no gradient) tensors.
StatusOr<Variable> Transpose(const Variable& x, int dim0, int dim1);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_SHAPE_OPS_H_
