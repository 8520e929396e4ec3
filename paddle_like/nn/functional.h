// Small differentiable tensor ops for custom forwards, in C++ and (as the arithmetic
// operators of paddle_like.Tensor and its reductions) in Python. The layers cover the
// heavy ops; these combine their outputs: a residual `x + f(x)`, gates, scaled losses.
// All take float32 CPU Variables; errors name the op and the shapes.
//
//   Add(a, b, alpha):   a + alpha * b        a, b: same shape
//   Mul(a, b):          a * b (element-wise) a, b: same shape
//   Affine(a, s, t):    s * a + t            any shape
//   Sum(a), Mean(a):    scalar (shape [])
//   Reshape(a, s):      view with shape s (one -1 allowed); backward reshapes back
//   MatMul(a, b):       (M, K) x (K, N) -> (M, N)
//
// Thread-safety: pure functions of their arguments (see Variable for graphs).
#ifndef PADDLE_LIKE_NN_FUNCTIONAL_H_
#define PADDLE_LIKE_NN_FUNCTIONAL_H_

#include "paddle_like/core/variable.h"

namespace pl::functional {

StatusOr<Variable> Add(const Variable& a, const Variable& b, float alpha = 1.0f);
StatusOr<Variable> Mul(const Variable& a, const Variable& b);
StatusOr<Variable> Affine(const Variable& a, float scale, float shift);
StatusOr<Variable> Sum(const Variable& a);
StatusOr<Variable> Mean(const Variable& a);
StatusOr<Variable> Reshape(const Variable& a, const Shape& shape);
StatusOr<Variable> MatMul(const Variable& a, const Variable& b);

}  // namespace pl::functional

#endif  // PADDLE_LIKE_NN_FUNCTIONAL_H_
