// The counter-based hashes and draws are part of the checkpoint and placement contract:
// pinned values catch any change of formula; the draws have the right moments.
#include "paddle_like/core/random.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pl {
namespace {

TEST(RandomTest, ValuesArePinned) {
  EXPECT_EQ(NameHash("fc1.w"), 5392503810094363940ULL);
  EXPECT_EQ(MixSeed(1, 2), 7553722183268099388ULL);
  EXPECT_DOUBLE_EQ(Uniform01(7, 3), 0.74578559344635964);
  EXPECT_DOUBLE_EQ(NormalDraw(7, 5, 2.0), 0.49852268281516665);
  EXPECT_NE(NameHash("fc1.w"), NameHash("fc1.b"));
}

TEST(RandomTest, DrawsHaveTheirMoments) {
  constexpr int kN = 200000;
  double u_sum = 0, n_sum = 0, n_sq = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    const double u = Uniform01(11, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    u_sum += u;
    const double x = NormalDraw(11, i, 3.0);
    n_sum += x;
    n_sq += x * x;
  }
  EXPECT_NEAR(u_sum / kN, 0.5, 0.005);
  EXPECT_NEAR(n_sum / kN, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(n_sq / kN), 3.0, 0.03);
}

}  // namespace
}  // namespace pl
