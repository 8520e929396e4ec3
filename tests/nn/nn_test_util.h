// Helpers shared by the nn tests: inputs that keep finite differences away from kinks
// (ReLU at 0) and ties (max pooling), and status message assertions.
#ifndef PADDLE_LIKE_TESTS_NN_NN_TEST_UTIL_H_
#define PADDLE_LIKE_TESTS_NN_NN_TEST_UTIL_H_

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/gradient_check.h"

namespace pl::testing {

// Uniform values with |x| in [0.1, 1.1]: more than a finite-difference step from 0.
inline Tensor AwayFromZero(const Shape& shape, uint32_t seed) {
  Tensor t = RandomTensor(shape, seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float& v = t.f32()[i];
    v = v < 0 ? v - 0.1f : v + 0.1f;
  }
  return t;
}

// A random permutation of {0, 0.05, 0.1, ...}: every gap exceeds two FD steps.
inline Tensor DistinctValues(const Shape& shape, uint32_t seed) {
  Tensor t(shape, DType::kFloat32);
  std::vector<int> idx(t.numel());
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = 0.05f * idx[i] - 1.0f;
  return t;
}

#define EXPECT_STATUS(expr, code_, ...)                                      \
  do {                                                                       \
    const ::pl::Status st_ = (expr);                                         \
    EXPECT_EQ(st_.code(), (code_)) << st_;                                   \
    for (const char* frag_ : {__VA_ARGS__}) {                                \
      EXPECT_THAT(std::string(st_.message()), ::testing::HasSubstr(frag_));  \
    }                                                                        \
  } while (0)

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_NN_NN_TEST_UTIL_H_
