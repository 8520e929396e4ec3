// Deterministic parameter initialisation. A value depends only on (seed, parameter
// name, row id), never on which process draws it or in which order, so a trainer,
// a parameter server and a single-process run create identical parameters and
// sparse rows created on first touch agree everywhere.
#ifndef PADDLE_LIKE_NN_INIT_H_
#define PADDLE_LIKE_NN_INIT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "paddle_like/core/random.h"

namespace pl {

struct InitSpec {
  enum class Kind : uint8_t { kZeros = 0, kConstant = 1, kUniform = 2, kNormal = 3 };
  Kind kind = Kind::kZeros;
  float scale = 0.0f;  // constant value, uniform half-width or normal stddev

  static InitSpec Zeros() { return {Kind::kZeros, 0.0f}; }
  static InitSpec Constant(float v) { return {Kind::kConstant, v}; }
  static InitSpec Uniform(float half_width) { return {Kind::kUniform, half_width}; }
  static InitSpec Normal(float stddev) { return {Kind::kNormal, stddev}; }
  // Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
  static InitSpec Glorot(int64_t fan_in, int64_t fan_out);
  // He/Kaiming uniform for ReLU layers: a = sqrt(6 / fan_in).
  static InitSpec He(int64_t fan_in);
};

// Fills out[0..n) with elements [offset, offset + n) of the stream drawn from `spec`
// and `stream_seed`; any slice of a parameter can be drawn independently.
void InitializeValues(const InitSpec& spec, uint64_t stream_seed, float* out, int64_t n,
                      int64_t offset = 0);

// The stream seed for a dense parameter and for one row of a sparse table.
inline uint64_t DenseStreamSeed(uint64_t seed, absl::string_view name) {
  return MixSeed(seed, NameHash(name));
}
inline uint64_t RowStreamSeed(uint64_t seed, absl::string_view table, int64_t row) {
  return MixSeed(MixSeed(seed, NameHash(table)), static_cast<uint64_t>(row));
}

}  // namespace pl

#endif  // PADDLE_LIKE_NN_INIT_H_
