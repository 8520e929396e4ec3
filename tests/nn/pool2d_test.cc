#include "paddle_like/nn/pool2d.h"

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::DistinctValues;
using testing::ExpectGradientsMatch;

TEST(MaxPool2DTest, ForwardPicksWindowMaxima) {
  MaxPool2D pool(2);
  // One 3x5 plane; floor drops the last row and column.
  Variable x(Tensor::FromVector({1, 1, 3, 5}, {1, 5, 2, 0, 9,   //
                                               3, 4, 8, 7, 9,   //
                                               9, 9, 9, 9, 9}));
  auto y = pool.Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(y->value().f32()[0], 5.0f);
  EXPECT_EQ(y->value().f32()[1], 8.0f);
}

struct PoolCase {
  Shape shape;
  int64_t kernel, stride;
};

class MaxPool2DGradTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPool2DGradTest, GradientsMatchFiniteDifferences) {
  const PoolCase c = GetParam();
  MaxPool2D pool(c.kernel, c.stride);
  Variable x(DistinctValues(c.shape, 3), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return pool.Forward(v[0]); }, {x});
}

INSTANTIATE_TEST_SUITE_P(Shapes, MaxPool2DGradTest,
                         ::testing::Values(PoolCase{{1, 1, 4, 4}, 2, 2},   // batch 1
                                           PoolCase{{2, 3, 5, 6}, 2, 2},   // floor, H != W
                                           PoolCase{{2, 2, 7, 5}, 3, 2},   // overlapping windows
                                           PoolCase{{1, 2, 6, 7}, 2, 3})); // gaps between windows

TEST(MaxPool2DTest, OverlappingWindowsAccumulateIntoOneArgmax) {
  MaxPool2D pool(2, 1);
  Variable x(Tensor::FromVector({1, 1, 3, 3}, {0, 0, 0, 0, 9, 0, 0, 0, 0}), true);
  auto y = pool.Forward(x);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Backward(Tensor::Filled({1, 1, 2, 2}, 1.0f)).ok());
  EXPECT_EQ(x.grad().f32()[4], 4.0f);  // the centre is the max of all four windows
  EXPECT_EQ(x.grad().flat().sum(), 4.0f);
}

TEST(MaxPool2DTest, BadInputsNameTheLayerAndShape) {
  MaxPool2D pool(3, 2);
  EXPECT_STATUS(pool.Forward(Variable(Tensor::Zeros({2, 8, 8}))).status(),
                absl::StatusCode::kInvalidArgument, "MaxPool2D(kernel=3, stride=2)",
                "[N, C, H, W]", "[2, 8, 8]");
  EXPECT_STATUS(pool.Forward(Variable(Tensor::Zeros({1, 1, 2, 8}))).status(),
                absl::StatusCode::kInvalidArgument, "MaxPool2D(kernel=3", "[1, 1, 2, 8]",
                "smaller than the kernel");
  MaxPool2D zero(0, 1);
  EXPECT_STATUS(zero.Forward(Variable(Tensor::Zeros({1, 1, 2, 2}))).status(),
                absl::StatusCode::kInvalidArgument, "kernel=0", "positive");
}

}  // namespace
}  // namespace pl
