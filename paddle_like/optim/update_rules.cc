#include "paddle_like/optim/update_rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <Eigen/Core>

#include "absl/strings/str_format.h"

namespace pl {

const char* OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSGD: return "sgd";
    case OptimizerKind::kMomentum: return "momentum";
    case OptimizerKind::kAdagrad: return "adagrad";
    case OptimizerKind::kAdam: return "adam";
  }
  return "unknown";
}

StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (OptimizerKind k : {OptimizerKind::kSGD, OptimizerKind::kMomentum, OptimizerKind::kAdagrad,
                          OptimizerKind::kAdam}) {
    if (lower == OptimizerName(k)) return k;
  }
  return absl::InvalidArgumentError("unknown optimizer '" + name +
                                    "' (known: sgd, momentum, adagrad, adam)");
}

std::string OptimizerSpec::ToString() const {
  return absl::StrFormat("%s(lr=%g, momentum=%g, beta1=%g, beta2=%g, eps=%g, wd=%g)",
                         OptimizerName(kind), learning_rate, momentum, beta1, beta2, epsilon,
                         weight_decay);
}

Status ValidateOptimizerSpec(const OptimizerSpec& s) {
  auto bad = [](const char* field, float v, const char* want) {
    return absl::InvalidArgumentError(absl::StrFormat("optimizer %s = %g: must be %s", field, v, want));
  };
  if (!(s.learning_rate > 0) || !std::isfinite(s.learning_rate)) return bad("learning_rate", s.learning_rate, "> 0");
  if (!(s.momentum >= 0 && s.momentum < 1)) return bad("momentum", s.momentum, "in [0, 1)");
  if (!(s.beta1 >= 0 && s.beta1 < 1)) return bad("beta1", s.beta1, "in [0, 1)");
  if (!(s.beta2 >= 0 && s.beta2 < 1)) return bad("beta2", s.beta2, "in [0, 1)");
  if (!(s.epsilon > 0)) return bad("epsilon", s.epsilon, "> 0");
  if (!(s.initial_accumulator >= 0)) return bad("initial_accumulator", s.initial_accumulator, ">= 0");
  if (!(s.weight_decay >= 0)) return bad("weight_decay", s.weight_decay, ">= 0");
  return absl::OkStatus();
}

int NumSlots(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSGD: return 0;
    case OptimizerKind::kMomentum: return 1;
    case OptimizerKind::kAdagrad: return 1;
    case OptimizerKind::kAdam: return 2;
  }
  return 0;
}

void InitSlots(const OptimizerSpec& spec, float* state, int64_t n) {
  const int64_t total = NumSlots(spec.kind) * n;
  const float v = spec.kind == OptimizerKind::kAdagrad ? spec.initial_accumulator : 0.0f;
  std::fill(state, state + total, v);
}

// Written over Eigen arrays so every rule vectorises (a scalar loop with std::sqrt
// does not, since sqrt may set errno): the optimizer step is on every trainer's and
// every pserver's hot path.
void ApplyUpdate(const OptimizerSpec& s, float* param, const float* grad, float* state, int64_t n,
                 int64_t step) {
  ApplyUpdate(s, param, grad, state, n, step, n);
}

void ApplyUpdate(const OptimizerSpec& s, float* param, const float* grad, float* state, int64_t n,
                 int64_t step, int64_t state_stride) {
  using Arr = Eigen::Map<Eigen::ArrayXf>;
  using ConstArr = Eigen::Map<const Eigen::ArrayXf>;
  Arr p(param, n);
  ConstArr g(grad, n);
  const float lr = s.learning_rate, wd = s.weight_decay;
  switch (s.kind) {
    case OptimizerKind::kSGD:
      if (wd == 0.0f) {
        p -= lr * g;
      } else {
        p -= lr * (g + wd * p);
      }
      break;
    case OptimizerKind::kMomentum: {
      Arr v(state, n);
      if (wd == 0.0f) {
        v = s.momentum * v + g;
      } else {
        v = s.momentum * v + (g + wd * p);
      }
      p -= lr * v;
      break;
    }
    case OptimizerKind::kAdagrad: {
      Arr a(state, n);
      if (wd == 0.0f) {
        a += g.square();
        p -= lr * g / (a.sqrt() + s.epsilon);
      } else {
        const Eigen::ArrayXf gi = g + wd * p;
        a += gi.square();
        p -= lr * gi / (a.sqrt() + s.epsilon);
      }
      break;
    }
    case OptimizerKind::kAdam: {
      Arr m(state, n);
      Arr v(state + state_stride, n);
      const double t = static_cast<double>(std::max<int64_t>(step, 1));
      const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta1, t)));
      const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(s.beta2, t)));
      const float b1 = s.beta1, b2 = s.beta2;
      if (wd == 0.0f) {
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g.square();
      } else {
        const Eigen::ArrayXf gi = g + wd * p;
        m = b1 * m + (1 - b1) * gi;
        v = b2 * v + (1 - b2) * gi.square();
      }
      p -= lr * (m * c1) / ((v * c2).sqrt() + s.epsilon);
      break;
    }
  }
}

}  // namespace pl
