// Helpers for the GPU tests: the skip guard, random host tensors, host<->device
// round trips and element-wise comparisons that report the worst element.
#ifndef PADDLE_LIKE_TESTS_CUDA_GPU_TEST_UTIL_H_
#define PADDLE_LIKE_TESTS_CUDA_GPU_TEST_UTIL_H_

#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "cuda/allocator.h"
#include "cuda/context.h"
#include "cuda/device.h"
#include "paddle_like/core/tensor.h"

// Skips the test (reported as skipped by ctest) when no CUDA device can be used.
#define PL_SKIP_WITHOUT_GPU()                                                  \
  do {                                                                         \
    if (!::pl::cuda::GpuAvailable()) {                                         \
      GTEST_SKIP() << "no CUDA device: " << ::pl::cuda::GpuUnavailableReason(); \
    }                                                                          \
  } while (0)

namespace pl::cuda::testing {

inline Tensor RandomTensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(shape, DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng);
  return t;
}

// Host tensor -> device (asserting success).
inline Tensor Up(const GpuContext& ctx, const Tensor& host) {
  auto dev = ToDevice(host, ctx.device(), ctx.stream());
  EXPECT_TRUE(dev.ok()) << dev.status();
  return dev.ok() ? *dev : Tensor();
}

inline Tensor Down(const GpuContext& ctx, const Tensor& dev) {
  auto host = ToHost(dev, ctx.stream());
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? *host : Tensor();
}

inline Tensor Empty(const GpuContext& ctx, const Shape& shape, DType dtype = DType::kFloat32) {
  auto t = AllocateDeviceTensor(shape, dtype, ctx.device());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// |a - b| <= atol + rtol * |b| everywhere; the failure names the worst element.
inline ::testing::AssertionResult AllClose(const Tensor& a, const Tensor& b, float atol = 1e-5f,
                                           float rtol = 1e-4f) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.ShapeString() << " vs " << b.ShapeString();
  }
  int64_t worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.f32()[i], y = b.f32()[i];
    const double excess = std::fabs(x - y) - (atol + rtol * std::fabs(y));
    if (!(excess <= 0) && (worst < 0 || !(excess <= worst_excess))) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (worst < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst << " of " << a.ShapeString() << ": "
                                       << a.f32()[worst] << " vs " << b.f32()[worst];
}

}  // namespace pl::cuda::testing

#endif  // PADDLE_LIKE_TESTS_CUDA_GPU_TEST_UTIL_H_
