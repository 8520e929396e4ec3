#include "paddle_like/nn/metrics.h"

#include <cmath>

#include <gtest/gtest.h>

namespace pl {
namespace {

TEST(BinaryAucTest, HandComputedWithoutTies) {
  // Positive/negative pairs ordered right: (0.35>0.1), (0.8>0.1), (0.8>0.4); wrong: 0.35<0.4.
  EXPECT_DOUBLE_EQ(BinaryAuc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
}

TEST(BinaryAucTest, TiesCountOneHalf) {
  // Positives {0.5, 0.9}, negatives {0.5, 0.2}: pairs 0.5 (tie), 1, 1, 1 -> 3.5 / 4.
  EXPECT_DOUBLE_EQ(BinaryAuc({0.5f, 0.5f, 0.2f, 0.9f}, {1, 0, 0, 1}), 0.875);
  EXPECT_DOUBLE_EQ(BinaryAuc({0.3f, 0.3f, 0.3f}, {1, 0, 1}), 0.5);
  // A tie group of three, two positives and one negative, plus clear pairs:
  // pos {0.7, 0.7, 0.9}, neg {0.7, 0.1}: 0.5+1 + 0.5+1 + 1+1 = 5 of 6.
  EXPECT_DOUBLE_EQ(BinaryAuc({0.7f, 0.7f, 0.7f, 0.9f, 0.1f}, {1, 1, 0, 1, 0}), 5.0 / 6);
}

TEST(BinaryAucTest, PerfectAndInverted) {
  EXPECT_DOUBLE_EQ(BinaryAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(BinaryAuc({0.1f, 0.2f, 0.8f, 0.9f}, {1, 1, 0, 0}), 0.0);
}

TEST(BinaryAucTest, UndefinedCasesAreNaN) {
  EXPECT_TRUE(std::isnan(BinaryAuc({0.1f, 0.2f}, {1, 1})));
  EXPECT_TRUE(std::isnan(BinaryAuc({}, {})));
  EXPECT_TRUE(std::isnan(BinaryAuc({0.1f, 0.2f}, {1})));
  EXPECT_TRUE(std::isnan(BinaryAuc({0.1f, NAN}, {1, 0})));
}

}  // namespace
}  // namespace pl
