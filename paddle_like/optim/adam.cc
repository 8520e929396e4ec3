// Adam: m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//       p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)   (g' = g + wd p).
// Two slots: m, v, from 0; t is the block's (or row's) own step count.
#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "paddle_like/optim/builtin_optimizers.h"

namespace pl {
namespace {

enum { kBeta1, kBeta2, kEpsilon };

// 1 / (1 - b^t) for both moments, in double then rounded to float. A sparse push updates
// thousands of rows, most at a step some other row just had: two pow() calls per row
// were a twentieth of the push. Cached per thread by t (the same values, so the same bits).
struct BiasCorrections {
  float b1 = -1.0f, b2 = -1.0f;
  int64_t t = -1;
  float c1 = 1.0f, c2 = 1.0f;
};
const BiasCorrections& CorrectionsFor(float b1, float b2, int64_t step) {
  thread_local BiasCorrections cache[64];
  BiasCorrections& e = cache[static_cast<uint64_t>(step) % 64];
  if (e.t != step || e.b1 != b1 || e.b2 != b2) {
    const double t = static_cast<double>(step);
    e = {b1, b2, step, static_cast<float>(1.0 / (1.0 - std::pow(b1, t))), static_cast<float>(1.0 / (1.0 - std::pow(b2, t)))};
  }
  return e;
}

void ApplyAdam(const OptimizerParams& o, const UpdateBlock& b) {
  Eigen::Map<Eigen::ArrayXf> p(b.param, b.n), m(b.state, b.n), v(b.state + b.state_stride, b.n);
  Eigen::Map<const Eigen::ArrayXf> g(b.grad, b.n);
  const float lr = o.learning_rate, wd = o.weight_decay;
  const float b1 = o.hyper[kBeta1], b2 = o.hyper[kBeta2], eps = o.hyper[kEpsilon];
  // The bias corrections in double, then rounded to float (the GPU kernel does the same).
  const BiasCorrections& bc = CorrectionsFor(b1, b2, std::max<int64_t>(b.step, 1));
  const float c1 = bc.c1, c2 = bc.c2;
  if (wd == 0.0f) {
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g.square();
  } else {
    const Eigen::ArrayXf gi = g + wd * p;
    m = b1 * m + (1 - b1) * gi;
    v = b2 * v + (1 - b2) * gi.square();
  }
  p -= lr * (m * c1) / ((v * c2).sqrt() + eps);
}

}  // namespace

OptimizerDef AdamOptimizer() {
  OptimizerDef d;
  d.name = "adam";
  d.help = "bias-corrected moments m, v; p -= lr m^ / (sqrt(v^) + epsilon)";
  d.hyper_params = {{"beta1", 0.9f, HyperParam::Range::kUnitInterval},
                    {"beta2", 0.999f, HyperParam::Range::kUnitInterval},
                    {"epsilon", 1e-8f, HyperParam::Range::kPositive}};
  d.slots = {"m", "v"};
  d.apply = ApplyAdam;
  return d;
}

}  // namespace pl
