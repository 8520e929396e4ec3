#include "paddle_like/nn/dropout.h"

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

TEST(DropoutTest, EvalModeIsTheIdentity) {
  Dropout drop(0.5f, 1);
  drop.Train(false);
  Variable x(testing::RandomTensor({4, 5}, 2), true);
  auto y = drop.Forward(x);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->node(), x.node());  // the same Variable: no copy, no graph node
  EXPECT_EQ(drop.calls(), 0u);
}

TEST(DropoutTest, TrainingZeroesAboutPAndScalesTheRest) {
  const float p = 0.3f;
  Dropout drop(p, 42);
  Variable x(testing::AwayFromZero({100, 1000}, 3), true);
  auto y = drop.Forward(x);
  ASSERT_TRUE(y.ok());
  int64_t zeros = 0;
  for (int64_t i = 0; i < x.value().numel(); ++i) {
    const float yi = y->value().f32()[i];
    if (yi == 0.0f) {
      ++zeros;
    } else {
      ASSERT_NEAR(yi, x.value().f32()[i] / (1 - p), 1e-6f) << i;
    }
  }
  // 100k Bernoulli(0.3) draws: the standard deviation of the fraction is 0.0015.
  EXPECT_NEAR(static_cast<double>(zeros) / x.value().numel(), p, 0.01);
}

TEST(DropoutTest, BackwardUsesTheForwardMask) {
  const float p = 0.5f;
  Dropout drop(p, 7);
  Variable x(testing::AwayFromZero({3, 50}, 4), true);
  auto y = drop.Forward(x);
  ASSERT_TRUE(y.ok());
  Tensor seed = testing::RandomTensor(x.shape(), 9);
  ASSERT_TRUE(y->Backward(seed).ok());
  for (int64_t i = 0; i < x.value().numel(); ++i) {
    const bool kept = y->value().f32()[i] != 0.0f;
    EXPECT_FLOAT_EQ(x.grad().f32()[i], kept ? seed.f32()[i] / (1 - p) : 0.0f) << i;
  }
}

TEST(DropoutTest, MasksAreDeterministicPerSeedAndNewPerCall) {
  Variable x(Tensor::Filled({1000}, 1.0f));
  Dropout a(0.5f, 123), b(0.5f, 123), c(0.5f, 124);
  auto a1 = a.Forward(x), a2 = a.Forward(x), b1 = b.Forward(x), c1 = c.Forward(x);
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok() && c1.ok());
  auto same = [](const Variable& u, const Variable& v) {
    return std::equal(u.value().f32(), u.value().f32() + u.value().numel(), v.value().f32());
  };
  EXPECT_TRUE(same(*a1, *b1));
  EXPECT_FALSE(same(*a1, *a2));
  EXPECT_FALSE(same(*a1, *c1));
  EXPECT_EQ(a.calls(), 2u);
  a.Reseed(123);
  auto again = a.Forward(x);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(same(*a1, *again));
}

TEST(DropoutTest, InvalidProbabilityIsReported) {
  Dropout drop(1.0f);
  auto y = drop.Forward(Variable(Tensor::Zeros({2})));
  EXPECT_STATUS(y.status(), absl::StatusCode::kInvalidArgument, "Dropout(p=1)", "[0, 1)");
}

}  // namespace
}  // namespace pl
