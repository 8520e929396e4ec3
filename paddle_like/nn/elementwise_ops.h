// Element-wise math on float32 CPU tensors of any shape (torch.exp, log, pow, abs,
// clamp, sqrt, and true division), with gradients. Values outside a function's domain
// follow IEEE as torch does: log(0) = -inf, log(-1) = NaN, sqrt(-1) = NaN; no error.
//
//   Exp(a)            d/da = exp(a)
//   Log(a)            d/da = 1 / a
//   Pow(a, p)         d/da = p * a^(p-1)   (0 when p == 0)
//   Abs(a)            d/da = sign(a)       (0 at 0, as torch)
//   Clamp(a, lo, hi)  either bound optional; the gradient passes where lo <= a <= hi
//   Sqrt(a)           d/da = 1 / (2 sqrt(a))
//   Div(a, b)         a / b, same shapes (no broadcasting)
//
// Thread-safety: pure functions of their arguments. Runs on the calling thread
// (memory-bound; see tensor_checks.h).
#ifndef PADDLE_LIKE_NN_ELEMENTWISE_OPS_H_
#define PADDLE_LIKE_NN_ELEMENTWISE_OPS_H_

#include <optional>

#include "paddle_like/core/variable.h"

namespace pl::functional {

StatusOr<Variable> Exp(const Variable& a);
StatusOr<Variable> Log(const Variable& a);
StatusOr<Variable> Pow(const Variable& a, float exponent);
StatusOr<Variable> Abs(const Variable& a);
StatusOr<Variable> Clamp(const Variable& a, std::optional<float> min, std::optional<float> max);
StatusOr<Variable> Sqrt(const Variable& a);
StatusOr<Variable> Div(const Variable& a, const Variable& b);

}  // namespace pl::functional

#endif  // PADDLE_LIKE_NN_ELEMENTWISE_OPS_H_
