#include "paddle_like/dist/bf16.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace pl {

StatusOr<WireDtype> ParseWireDtype(std::string_view name) {
  if (name == "float32" || name == "fp32") return WireDtype::kFloat32;
  if (name == "bfloat16" || name == "bf16") return WireDtype::kBfloat16;
  return absl::InvalidArgumentError(absl::StrCat("wire dtype '", std::string(name), "': known are float32 and bfloat16"));
}

const char* WireDtypeName(WireDtype dtype) { return dtype == WireDtype::kBfloat16 ? "bfloat16" : "float32"; }

namespace {

inline uint16_t RoundToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
  }
  // Ties to even: add 0x7fff plus the lowest kept bit, then truncate. A value within
  // half an ulp of the largest float rounds to infinity, as IEEE rounding does.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

void EncodeBf16(const float* src, int64_t n, uint16_t* dst, float* residual) {
  if (residual == nullptr) {
    for (int64_t i = 0; i < n; ++i) dst[i] = RoundToBf16(src[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float want = src[i] + residual[i];
    const uint16_t h = RoundToBf16(want);
    dst[i] = h;
    const float sent = Bf16ToFloat(h);
    // A non-finite value cannot be fed back (inf - inf is NaN): drop it; the pserver
    // refuses such a push anyway.
    residual[i] = (want - sent == want - sent) ? want - sent : 0.0f;
  }
}

void DecodeBf16(const void* src, int64_t n, float* dst) {
  const char* p = static_cast<const char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = Bf16ToFloat(h);
  }
}

}  // namespace pl
