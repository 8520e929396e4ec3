#include "paddle_like/nn/init.h"

#include <cmath>

namespace pl {

InitSpec InitSpec::Glorot(int64_t fan_in, int64_t fan_out) {
  return Uniform(std::sqrt(6.0f / static_cast<float>(fan_in + fan_out)));
}

InitSpec InitSpec::He(int64_t fan_in) {
  return Uniform(std::sqrt(6.0f / static_cast<float>(fan_in)));
}

uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL + (b * 0xbf58476d1ce4e5b9ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t NameHash(absl::string_view name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return MixSeed(h, 0);
}

namespace {
// xoshiro-style generator is overkill here; splitmix64 passes BigCrush and is tiny.
struct SplitMix {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform01() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
};
}  // namespace

void InitializeValues(const InitSpec& spec, uint64_t stream_seed, float* out, int64_t n) {
  SplitMix rng{stream_seed};
  switch (spec.kind) {
    case InitSpec::Kind::kZeros:
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      break;
    case InitSpec::Kind::kConstant:
      for (int64_t i = 0; i < n; ++i) out[i] = spec.scale;
      break;
    case InitSpec::Kind::kUniform:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<float>((2.0 * rng.Uniform01() - 1.0) * spec.scale);
      }
      break;
    case InitSpec::Kind::kNormal:
      for (int64_t i = 0; i < n; i += 2) {  // Box-Muller, two values per draw
        double u1 = rng.Uniform01(), u2 = rng.Uniform01();
        double r = std::sqrt(-2.0 * std::log(u1 + 1e-300)) * spec.scale;
        out[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
        if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
      }
      break;
  }
}

}  // namespace pl
