// Adam: m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//       p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)   (g' = g + wd p).
// Two slots: m, v, from 0; t is the block's (or row's) own step count.
//
// A gradient that is the mean of k pushes (a sync step of k trainers, UpdateBlock::
// averaged) carries 1/k of one push's noise variance. v keeps k g'^2, the noise of one
// push, and the step divides it by k again: with k constant this is Adam exactly (up to
// rounding; k = 1 is bit for bit), and when a trainer leaves a sync job, v is not
// calibrated to the quieter steps of more trainers. Without this each step after the
// change was up to sqrt(k_before / k_after) too large until v caught up (~1 / (1 - b2)
// steps), and the job's final accuracy fell the more the later a trainer left
// (benchmarks/README.md, issue 40's sync chaos).
//
// A warm restart (OptimizerDef::restart) is what a block gets when its values come
// back without their moments: a shard that lost every copy takes a trainer's copy of
// its values. Started from zero with bias correction, m^ / sqrt(v^) is sign(g) on the
// first step: lr in every element, several times what a trained Adam steps, late in a
// job when it hurts most. A restarted element takes m uncorrected instead, so its step
// ramps up over ~1 / (1 - b1) updates: the first is 0.1 lr sign(g) at b1 = 0.9. v^
// stays bias-corrected, t counting from the restart (UpdateRule::Apply's
// restarted_at): the mean of g^2 since, which a few updates make a fair estimate
// before m has grown into it. (Seeding v from the first g^2 alone, with t going on, was
// worse: elements whose first gradient was small then stepped up to 6 lr for hundreds
// of updates, in a simulation of 20,000 elements.) The mark is v's sign bit (v >= 0
// otherwise): restart stores v = -0, and a restarted element keeps v negated until m's
// correction has vanished in float (c1 == 1, ~160 updates at b1 = 0.9), when it is
// plain Adam again. Being in the values, the mark travels with checkpoints, snapshots
// and the replication stream unchanged.
#include <algorithm>
#include <cmath>

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

// Restarted elements (v's sign bit set), and any others in the same update. Rare (a
// block's first ~160 updates after a restore), so one plain loop for every case.
void ApplyRestarted(const OptimizerParams& o, const UpdateBlock& b, float c1, float c2) {
  float* p = b.param;
  float* m = b.state;
  float* v = b.state + b.state_stride;
  const float lr = o.learning_rate, wd = o.weight_decay, k = b.averaged;
  const float b1 = o.hyper[kBeta1], b2 = o.hyper[kBeta2], eps = o.hyper[kEpsilon];
  const float a1 = 1 - b1, a2 = 1 - b2, c2_per_push = c2 / k;
  const bool warmed_up = c1 == 1.0f;
  for (int64_t i = 0; i < b.n; ++i) {
    const bool restarted = std::signbit(v[i]);
    const float gi = b.grad[i] + wd * p[i];
    const float mi = b1 * m[i] + a1 * gi;
    const float vi = b2 * std::fabs(v[i]) + a2 * (k * (gi * gi));
    m[i] = mi;
    v[i] = restarted && !warmed_up ? -vi : vi;
    p[i] -= lr * (restarted ? mi : mi * c1) / (std::sqrt(vi * c2_per_push) + eps);
  }
}

void RestartAdam(float* state, int64_t n, int64_t state_stride) {
  std::fill(state, state + n, 0.0f);
  std::fill(state + state_stride, state + state_stride + n, -0.0f);
}

// One pass over the block, element by element: Eigen's three passes (m, v, then p)
// read m and v twice, and without EIGEN_FAST_MATH (see CMakeLists.txt) its sqrt does not
// vectorise; this loop does (-fno-math-errno), with the same exactly rounded sqrt and
// the same operations in the same order, so the bits are those of the Eigen form: 5.5x
// faster on a 536k-element block (benchmarks/README.md, pl-bench-core's optimizer line).
void ApplyAdam(const OptimizerParams& o, const UpdateBlock& b) {
  float* p = b.param;
  float* m = b.state;
  float* v = b.state + b.state_stride;
  const float* g = b.grad;
  const float lr = o.learning_rate, wd = o.weight_decay;
  const float b1 = o.hyper[kBeta1], b2 = o.hyper[kBeta2], eps = o.hyper[kEpsilon];
  const float a1 = 1 - b1, a2 = 1 - b2;
  // The bias corrections in double, then rounded to float (the GPU kernel does the same).
  const BiasCorrections& bc = CorrectionsFor(b1, b2, std::max<int64_t>(b.step, 1));
  const float c1 = bc.c1, c2 = bc.c2;
  // A restart marks whole blocks, so the first element tells.
  if (b.n > 0 && std::signbit(v[0])) {
    ApplyRestarted(o, b, c1, c2);
    return;
  }
  if (b.averaged != 1.0f) {
    const float k = b.averaged, c2_per_push = c2 / k;
    for (int64_t i = 0; i < b.n; ++i) {
      const float gi = g[i] + wd * p[i];
      const float mi = b1 * m[i] + a1 * gi;
      const float vi = b2 * v[i] + a2 * (k * (gi * gi));
      m[i] = mi;
      v[i] = vi;
      p[i] -= lr * (mi * c1) / (std::sqrt(vi * c2_per_push) + eps);
    }
    return;
  }
  if (wd == 0.0f) {
    for (int64_t i = 0; i < b.n; ++i) {
      const float gi = g[i];
      const float mi = b1 * m[i] + a1 * gi;
      const float vi = b2 * v[i] + a2 * (gi * gi);
      m[i] = mi;
      v[i] = vi;
      p[i] -= lr * (mi * c1) / (std::sqrt(vi * c2) + eps);
    }
  } else {
    for (int64_t i = 0; i < b.n; ++i) {
      const float gi = g[i] + wd * p[i];
      const float mi = b1 * m[i] + a1 * gi;
      const float vi = b2 * v[i] + a2 * (gi * gi);
      m[i] = mi;
      v[i] = vi;
      p[i] -= lr * (mi * c1) / (std::sqrt(vi * c2) + eps);
    }
  }
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
  d.restart = RestartAdam;
  return d;
}

}  // namespace pl
