// Adagrad: a += g'^2;  p -= lr g' / (sqrt(a) + eps)   (g' = g + wd p). One slot: a,
// from initial_accumulator.
#include <Eigen/Core>

#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

enum { kEpsilon, kInitialAccumulator };

void ApplyAdagrad(const OptimizerParams& o, const UpdateBlock& b) {
  Eigen::Map<Eigen::ArrayXf> p(b.param, b.n), a(b.state, b.n);
  Eigen::Map<const Eigen::ArrayXf> g(b.grad, b.n);
  const float lr = o.learning_rate, wd = o.weight_decay, eps = o.hyper[kEpsilon];
  if (wd == 0.0f) {
    a += g.square();
    p -= lr * g / (a.sqrt() + eps);
  } else {
    const Eigen::ArrayXf gi = g + wd * p;
    a += gi.square();
    p -= lr * gi / (a.sqrt() + eps);
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
