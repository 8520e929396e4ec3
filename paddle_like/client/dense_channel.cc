#include "paddle_like/client/dense_channel.h"

#include <vector>

namespace pl {

void Bf16Residuals::Encode(const std::string& param, int64_t offset, const float* grads, int64_t n, uint16_t* out) {
  EncodeBf16(grads, n, out, For(param, offset, n));
}

void Bf16Residuals::Encode(const std::string& param, int64_t offset, const FloatPieces& grads, uint16_t* out) {
  if (const float* in_place = grads.contiguous()) {
    Encode(param, offset, in_place, grads.size(), out);
    return;
  }
  std::vector<float> gathered(grads.size());
  grads.CopyTo(gathered.data());
  Encode(param, offset, gathered.data(), grads.size(), out);
}

float* Bf16Residuals::For(const std::string& param, int64_t offset, int64_t n) {
  std::vector<float>& r = residuals_[param];
  if (static_cast<int64_t>(r.size()) < offset + n) r.resize(offset + n, 0.0f);
  return r.data() + offset;
}

}  // namespace pl
