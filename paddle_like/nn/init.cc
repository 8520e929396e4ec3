#include "paddle_like/nn/init.h"

#include <cmath>

namespace pl {

InitSpec InitSpec::Glorot(int64_t fan_in, int64_t fan_out) {
  return Uniform(std::sqrt(6.0f / static_cast<float>(fan_in + fan_out)));
}

InitSpec InitSpec::He(int64_t fan_in) {
  return Uniform(std::sqrt(6.0f / static_cast<float>(fan_in)));
}

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
      case InitSpec::Kind::kNormal:
        out[j] = static_cast<float>(NormalDraw(stream_seed, i, spec.scale));
        break;
    }
  }
}

}  // namespace pl
