// SGD: p -= lr * (g + wd p). No state.
#include <Eigen/Core>

#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

void ApplySgd(const OptimizerParams& o, const UpdateBlock& b) {
  Eigen::Map<Eigen::ArrayXf> p(b.param, b.n);
  Eigen::Map<const Eigen::ArrayXf> g(b.grad, b.n);
  const float lr = o.learning_rate, wd = o.weight_decay;
  if (wd == 0.0f) {
    p -= lr * g;
  } else {
    p -= lr * (g + wd * p);
  }
}

}  // namespace

OptimizerDef SgdOptimizer() {
  OptimizerDef d;
  d.name = "sgd";
  d.help = "p -= lr g";
  d.apply = ApplySgd;
  return d;
}

}  // namespace pl
