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
// Counter-based draws: element i depends only on (seed, i), so any block of a
// parameter can be drawn on its own (a parameter server draws only its blocks).
inline double Uniform01(uint64_t seed, uint64_t counter) {
  return (MixSeed(seed, counter) >> 11) * (1.0 / 9007199254740992.0);
}
}  // namespace

void InitializeValues(const InitSpec& spec, uint64_t stream_seed, float* out, int64_t n,
                      int64_t offset) {
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t i = static_cast<uint64_t>(offset + j);
    switch (spec.kind) {
      case InitSpec::Kind::kZeros:
        out[j] = 0.0f;
        break;
      case InitSpec::Kind::kConstant:
        out[j] = spec.scale;
        break;
      case InitSpec::Kind::kUniform:
        out[j] = static_cast<float>((2.0 * Uniform01(stream_seed, i) - 1.0) * spec.scale);
        break;
      case InitSpec::Kind::kNormal: {  // Box-Muller over the pair (2k, 2k+1)
        const uint64_t k = i / 2;
        const double u1 = Uniform01(stream_seed, 2 * k), u2 = Uniform01(stream_seed, 2 * k + 1);
        const double r = std::sqrt(-2.0 * std::log(u1 + 1e-300)) * spec.scale;
        out[j] = static_cast<float>(r * ((i & 1) ? std::sin(2 * M_PI * u2) : std::cos(2 * M_PI * u2)));
        break;
      }
    }
  }
}

}  // namespace pl
