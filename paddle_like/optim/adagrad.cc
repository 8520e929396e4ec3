// Adagrad: a += g'^2;  p -= lr g' / (sqrt(a) + eps)   (g' = g + wd p). One slot: a,
// from initial_accumulator.
#include <cmath>

#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

enum { kEpsilon, kInitialAccumulator };

// One vectorised pass (as adam.cc's, and for the same reasons), bit for bit the Eigen
// form a += g^2; p -= lr g / (sqrt(a) + eps).
void ApplyAdagrad(const OptimizerParams& o, const UpdateBlock& b) {
  float* p = b.param;
  float* a = b.state;
  const float* g = b.grad;
  const float lr = o.learning_rate, wd = o.weight_decay, eps = o.hyper[kEpsilon];
  for (int64_t i = 0; i < b.n; ++i) {
    const float gi = wd == 0.0f ? g[i] : g[i] + wd * p[i];
    const float ai = a[i] + gi * gi;
    a[i] = ai;
    p[i] -= lr * gi / (std::sqrt(ai) + eps);
  }
}

}  // namespace

OptimizerDef AdagradOptimizer() {
  OptimizerDef d;
  d.name = "adagrad";
  d.help = "a += g^2; p -= lr g / (sqrt(a) + epsilon)";
  d.hyper_params = {{"epsilon", 1e-8f, HyperParam::Range::kPositive},
                    {"initial_accumulator", 0.1f, HyperParam::Range::kNonNegative}};
  d.slots = {"a"};
  d.slot_init_param = {kInitialAccumulator};
  d.apply = ApplyAdagrad;
  return d;
}

}  // namespace pl
