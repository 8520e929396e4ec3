// Dropout: inverted dropout. In training mode each element is zeroed with
// probability p and the survivors are scaled by 1 / (1 - p), so evaluation mode is
// the identity (it returns its input Variable unchanged).
// Masks are deterministic: the k-th training call of a layer built with `seed` draws
// mask k from (seed, k) alone, so reruns reproduce, and each call draws a new mask.
//
// Thread-safety: see Module (the call counter is per layer, not synchronised).
#ifndef PADDLE_LIKE_NN_DROPOUT_H_
#define PADDLE_LIKE_NN_DROPOUT_H_

#include <cstdint>

#include "paddle_like/nn/module.h"

namespace pl {

class Dropout : public Layer {
 public:
  // `p` must be in [0, 1); Forward reports an invalid p (constructors cannot fail).
  explicit Dropout(float p, uint64_t seed = 0);
  StatusOr<Variable> Forward(const Variable& x) override;

  float p() const { return p_; }
  uint64_t seed() const { return seed_; }
  uint64_t calls() const { return calls_; }  // training calls so far
  // Restarts the mask sequence (e.g. when a trainer resumes from a checkpoint).
  void Reseed(uint64_t seed, uint64_t calls = 0) {
    seed_ = seed;
    calls_ = calls;
  }

 private:
  float p_;
  uint64_t seed_;
  uint64_t calls_ = 0;
};

// torch.nn.functional.dropout: with `training` false, or p == 0, returns x itself;
// otherwise zeroes each element with probability p (p == 1: all) and scales the rest by
// 1 / (1 - p). The mask is element i's hash of (seed, i) alone: the same seed gives
// the same mask, so pass a fresh seed per call. p must be in [0, 1].
StatusOr<Variable> DropoutOp(const Variable& x, float p, bool training, uint64_t seed);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_DROPOUT_H_
