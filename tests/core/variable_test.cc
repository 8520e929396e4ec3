#include "paddle_like/core/variable.h"

#include <thread>

#include <gtest/gtest.h>

#include "paddle_like/core/grad_mode.h"

namespace pl {
namespace {

// y = a * b (elementwise), z = sum(y + a): dz/da = b + 1, dz/db = a.
Variable Mul(const Variable& a, const Variable& b) {
  Tensor y = a.value().Clone();
  y.flat().array() *= b.value().flat().array();
  return Variable::FromOp(y, {a, b}, [a, b](const Tensor& g) {
    Tensor ga = g.Clone();
    ga.flat().array() *= b.value().flat().array();
    a.AccumulateGrad(ga);
    Tensor gb = g.Clone();
    gb.flat().array() *= a.value().flat().array();
    b.AccumulateGrad(gb);
  });
}

Variable SumPlus(const Variable& y, const Variable& a) {
  Tensor s = Tensor::Filled({1}, y.value().flat().sum() + a.value().flat().sum());
  return Variable::FromOp(s, {y, a}, [y, a](const Tensor& g) {
    y.AccumulateGrad(Tensor::Filled(y.shape(), g.f32()[0]));
    a.AccumulateGrad(Tensor::Filled(a.shape(), g.f32()[0]));
  });
}

TEST(VariableTest, NoGradScopeRecordsNoGraphAndNests) {
  Variable a(Tensor::FromVector({2}, {1, 2}), true);
  Variable b(Tensor::FromVector({2}, {3, 4}), true);
  {
    NoGradScope outer;
    Variable y = Mul(a, b);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.node()->inputs.empty());  // nothing keeps a or b alive
    EXPECT_FLOAT_EQ(y.value().f32()[1], 8);
    {
      NoGradScope inner;
    }
    EXPECT_FALSE(Mul(a, b).requires_grad());  // the inner scope's end keeps the outer one
    EXPECT_TRUE(absl::IsFailedPrecondition(SumPlus(y, a).Backward()));
  }
  Variable z = SumPlus(Mul(a, b), a);  // recording again after the scope
  ASSERT_TRUE(z.Backward().ok());
  EXPECT_FLOAT_EQ(b.grad().f32()[1], 2);
}

TEST(VariableTest, SetGradEnabledReturnsThePreviousStateAndIsPerThread) {
  Variable a(Tensor::FromVector({2}, {1, 2}), true);
  ASSERT_TRUE(GradEnabled());
  EXPECT_TRUE(SetGradEnabled(false));
  EXPECT_FALSE(Mul(a, a).requires_grad());
  bool other_thread_enabled = false;
  std::thread([&] { other_thread_enabled = GradEnabled(); }).join();
  EXPECT_TRUE(other_thread_enabled);  // thread_local: another thread starts enabled
  {
    NoGradScope scope;  // nests inside a switch that is already off
  }
  EXPECT_FALSE(GradEnabled());
  EXPECT_FALSE(SetGradEnabled(true));
  EXPECT_TRUE(Mul(a, a).requires_grad());
}

TEST(VariableTest, DiamondGraphAccumulatesBothPaths) {
  Variable a(Tensor::FromVector({2}, {1, 2}), true);
  Variable b(Tensor::FromVector({2}, {3, 4}), true);
  Variable z = SumPlus(Mul(a, b), a);
  ASSERT_TRUE(z.Backward().ok());
  EXPECT_FLOAT_EQ(a.grad().f32()[0], 4);
  EXPECT_FLOAT_EQ(a.grad().f32()[1], 5);
  EXPECT_FLOAT_EQ(b.grad().f32()[0], 1);
  EXPECT_FLOAT_EQ(b.grad().f32()[1], 2);
}

TEST(VariableTest, NonScalarBackwardWithoutSeedIsAnError) {
  Variable a(Tensor::FromVector({2}, {1, 2}), true);
  Variable y = Mul(a, a);
  Status s = y.Backward();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[2]"), std::string::npos);
}

TEST(VariableTest, ConstantsDoNotBuildAGraph) {
  Variable a(Tensor::FromVector({2}, {1, 2}), false);
  Variable y = Mul(a, a);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.Backward().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pl
