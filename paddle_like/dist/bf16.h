// bfloat16 on the wire: a float32 with its low 16 mantissa bits rounded away (to
// nearest, ties to even), so dense gradients and parameters cross the network in half
// the bytes (--wire_dtype bfloat16). The exponent range stays float32's, so nothing
// overflows that did not before; the precision is 8 bits, about 2-3 decimal digits.
//
// Error feedback: a sender that keeps a residual (what rounding dropped last time)
// adds it to the next values before rounding, so over many steps the sum of what
// arrives equals the sum of what was meant, up to one rounding: nothing is lost over
// time, only delayed.
//
// Thread-safety: pure functions.
#ifndef PADDLE_LIKE_DIST_BF16_H_
#define PADDLE_LIKE_DIST_BF16_H_

#include <cstdint>
#include <string_view>

#include "paddle_like/core/status.h"

namespace pl {

enum class WireDtype : uint8_t { kFloat32 = 0, kBfloat16 = 1 };

// "float32" / "bfloat16" (also "fp32", "bf16"); INVALID_ARGUMENT naming the known ones.
StatusOr<WireDtype> ParseWireDtype(std::string_view name);
const char* WireDtypeName(WireDtype dtype);

// dst[i] = bf16(src[i] + residual[i]); residual[i] = that sum - float(dst[i]). Without
// a residual (nullptr), plain rounding. NaN stays NaN, infinities stay infinite.
void EncodeBf16(const float* src, int64_t n, uint16_t* dst, float* residual = nullptr);
// dst[i] = float(src[i]), exact. `src` may be unaligned.
void DecodeBf16(const void* src, int64_t n, float* dst);

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_BF16_H_
