// The built-in optimizers' definitions, one file each; RegisterBuiltinOptimizers
// (optimizer_registry.h) registers them. Internal to paddle_like/optim.
//
//   SGD:      p -= lr * (g + wd p)
//   Momentum: v = mu v + g';  p -= lr v                 (g' = g + wd p)
//   Adagrad:  a += g'^2;  p -= lr g' / (sqrt(a) + eps)  (a starts at initial_accumulator)
//   Adam:     m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//             p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//
// Each is written over Eigen arrays so it vectorises (a scalar loop with std::sqrt
// does not, since sqrt may set errno): the update is on every trainer's and every
// pserver's hot path.
#ifndef PADDLE_LIKE_OPTIM_BUILTIN_OPTIMIZERS_H_
#define PADDLE_LIKE_OPTIM_BUILTIN_OPTIMIZERS_H_

#include "paddle_like/optim/optimizer_registry.h"

namespace pl {

OptimizerDef SgdOptimizer();       // sgd.cc
OptimizerDef MomentumOptimizer();  // momentum.cc
OptimizerDef AdagradOptimizer();   // adagrad.cc
OptimizerDef AdamOptimizer();      // adam.cc

}  // namespace pl

#endif  // PADDLE_LIKE_OPTIM_BUILTIN_OPTIMIZERS_H_
