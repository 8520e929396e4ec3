// Momentum: v = mu v + g';  p -= lr v   (g' = g + wd p). One slot: v, from 0.
#include <Eigen/Core>

#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

enum { kMomentum };

void ApplyMomentum(const OptimizerParams& o, const UpdateBlock& b) {
  Eigen::Map<Eigen::ArrayXf> p(b.param, b.n), v(b.state, b.n);
  Eigen::Map<const Eigen::ArrayXf> g(b.grad, b.n);
  const float lr = o.learning_rate, wd = o.weight_decay, mu = o.hyper[kMomentum];
  if (wd == 0.0f) {
    v = mu * v + g;
  } else {
    v = mu * v + (g + wd * p);
  }
  p -= lr * v;
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
