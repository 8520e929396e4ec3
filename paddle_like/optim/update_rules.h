// Optimizer update rules as plain functions over (parameter, gradient, state), so
// the single-process optimizer and the parameter server apply exactly the same code.
// State is `NumSlots(kind)` float slots per element, slot-major: slot k of an n-element
// block starts at state + k*n. Sparse rows use the same functions row by row with a
// per-row step count, which gives lazy updates: a row untouched by a batch keeps its
// value and its state.
//
//   SGD:      p -= lr * (g + wd p)
//   Momentum: v = mu v + g';  p -= lr v                 (g' = g + wd p)
//   Adagrad:  a += g'^2;  p -= lr g' / (sqrt(a) + eps)  (a starts at initial_accumulator)
//   Adam:     m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//             p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
#ifndef PADDLE_LIKE_OPTIM_UPDATE_RULES_H_
#define PADDLE_LIKE_OPTIM_UPDATE_RULES_H_

#include <cstdint>
#include <string>

#include "paddle_like/core/status.h"

namespace pl {

enum class OptimizerKind : uint8_t { kSGD = 0, kMomentum = 1, kAdagrad = 2, kAdam = 3 };

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kSGD;
  float learning_rate = 0.01f;
  float momentum = 0.9f;              // Momentum
  float beta1 = 0.9f;                 // Adam
  float beta2 = 0.999f;               // Adam
  float epsilon = 1e-8f;              // Adam, Adagrad
  float initial_accumulator = 0.1f;   // Adagrad
  float weight_decay = 0.0f;          // L2, added to the gradient

  std::string ToString() const;
};

const char* OptimizerName(OptimizerKind kind);
// "sgd", "momentum", "adagrad" or "adam" (case-insensitive).
StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& name);
// Checks ranges (lr > 0, 0 <= betas < 1, ...); the error names the field.
Status ValidateOptimizerSpec(const OptimizerSpec& spec);

int NumSlots(OptimizerKind kind);
// Initial state values for `n` elements (Adagrad's accumulator is not zero).
void InitSlots(const OptimizerSpec& spec, float* state, int64_t n);

// One update of n elements. `step` is the 1-based number of updates these elements
// have received including this one (Adam's bias correction uses it).
void ApplyUpdate(const OptimizerSpec& spec, float* param, const float* grad, float* state,
                 int64_t n, int64_t step);
// The same over part of a larger array: slot k of element i is state[k * state_stride + i].
// Updates are elementwise, so a block updated in parts equals the block updated whole.
void ApplyUpdate(const OptimizerSpec& spec, float* param, const float* grad, float* state,
                 int64_t n, int64_t step, int64_t state_stride);

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_UPDATE_RULES_H_
