// Counter-based hashing and random draws: every value depends only on (seed, counter),
// never on the order of the draws or on which process makes them, so placement
// (dist/sharding.h), shuffling (data/) and parameter initialisation (nn/init.h) agree
// across trainers, parameter servers and single-process runs. The formulas are part of
// the on-disk and on-wire contract (checkpoints, shard placement): never change them.
//
// Thread-safety: pure functions.
#ifndef PADDLE_LIKE_CORE_RANDOM_H_
#define PADDLE_LIKE_CORE_RANDOM_H_

#include <cmath>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace pl {

// Mixes two integers into one stream seed (splitmix64 finaliser).
inline uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL + (b * 0xbf58476d1ce4e5b9ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A 64-bit hash of a name (FNV-1a, then mixed); stable across builds and hosts.
inline uint64_t NameHash(absl::string_view name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return MixSeed(h, 0);
}

// Draw `counter` of stream `seed`, uniform in [0, 1) with 53 bits.
inline double Uniform01(uint64_t seed, uint64_t counter) {
  return static_cast<double>(MixSeed(seed, counter) >> 11) * (1.0 / 9007199254740992.0);
}

// Draw `i` of stream `seed` from N(0, stddev^2): Box-Muller over the uniform pair
// (2k, 2k+1), cosine for even i and sine for odd i.
inline double NormalDraw(uint64_t seed, uint64_t i, double stddev) {
  const uint64_t k = i / 2;
  const double u1 = Uniform01(seed, 2 * k), u2 = Uniform01(seed, 2 * k + 1);
  const double r = std::sqrt(-2.0 * std::log(u1 + 1e-300)) * stddev;
  return r * ((i & 1) ? std::sin(2 * M_PI * u2) : std::cos(2 * M_PI * u2));
}

}  // namespace pl

#endif  // PADDLE_LIKE_CORE_RANDOM_H_
