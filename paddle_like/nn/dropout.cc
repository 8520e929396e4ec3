#include "paddle_like/nn/dropout.h"

#include "paddle_like/nn/tensor_checks.h"
#include "paddle_like/nn/init.h"

namespace pl {

Dropout::Dropout(float p, uint64_t seed) : Layer("Dropout"), p_(p), seed_(seed) {}

namespace {

// Inverted dropout with the mask drawn from `stream`; p in [0, 1], x checked.
Variable ApplyMask(const Variable& x, float p, uint64_t stream) {
  const Tensor& xv = x.value();
  const int64_t n = xv.numel();
  // mask holds 0 or 1/(1-p): forward is x * mask, backward gy * mask.
  Tensor mask(xv.shape(), DType::kFloat32);
  Tensor y(xv.shape(), DType::kFloat32);
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  // Compare the top 24 bits of a counter-based hash against p: element i depends only
  // on (stream, i), never on the order of the draws.
  const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(p) * (1u << 24));
  float* m = mask.f32();
  const float* in = xv.f32();
  float* out = y.f32();
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(MixSeed(stream, static_cast<uint64_t>(i)) >> 40);
    m[i] = u >= threshold ? scale : 0.0f;
    out[i] = in[i] * m[i];
  }
  return Variable::FromOp(y, {x}, [x, mask](const Tensor& gy) {
    if (!x.requires_grad()) return;
    x.MutableGrad().flat().array() += gy.flat().array() * mask.flat().array();
  });
}

}  // namespace

StatusOr<Variable> Dropout::Forward(const Variable& x) {
  const std::string op = absl::StrCat("Dropout(p=", p_, ")");
  if (!(p_ >= 0.0f && p_ < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": p must be in [0, 1)"));
  }
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  if (!training() || p_ == 0.0f) return x;
  return ApplyMask(x, p_, MixSeed(MixSeed(seed_, 0x64726f70ULL /* "drop" */), calls_++));
}

StatusOr<Variable> DropoutOp(const Variable& x, float p, bool training, uint64_t seed) {
  const std::string op = absl::StrCat("dropout(p=", p, ")");
  if (!(p >= 0.0f && p <= 1.0f)) return absl::InvalidArgumentError(op + ": p must be in [0, 1]");
  if (!x.defined()) return absl::InvalidArgumentError(op + ": input is undefined");
  PL_RETURN_IF_ERROR(internal::CheckFloatCpu(x.value(), op));
  if (!training || p == 0.0f) return x;
  return ApplyMask(x, p, seed);
}

}  // namespace pl
