// Momentum: v = mu v + g';  p -= lr v   (g' = g + wd p). One slot: v, from 0.
#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

enum { kMomentum };

// One pass (Eigen's form took two, reading v twice), bit for bit the same.
void ApplyMomentum(const OptimizerParams& o, const UpdateBlock& b) {
  float* p = b.param;
  float* v = b.state;
  const float* g = b.grad;
  const float lr = o.learning_rate, wd = o.weight_decay, mu = o.hyper[kMomentum];
  for (int64_t i = 0; i < b.n; ++i) {
    const float vi = mu * v[i] + (wd == 0.0f ? g[i] : g[i] + wd * p[i]);
    v[i] = vi;
    p[i] -= lr * vi;
  }
}

}  // namespace

OptimizerDef MomentumOptimizer() {
  OptimizerDef d;
  d.name = "momentum";
  d.help = "v = momentum v + g; p -= lr v";
  d.hyper_params = {{"momentum", 0.9f, HyperParam::Range::kUnitInterval}};
  d.slots = {"v"};
  d.apply = ApplyMomentum;
  return d;
}

}  // namespace pl
