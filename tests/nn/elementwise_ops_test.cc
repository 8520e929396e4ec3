// Element-wise math ops and GELU: values by hand, gradients against finite
// differences, IEEE results outside the domain, and Transpose of any rank.
#include "paddle_like/nn/elementwise_ops.h"

#include <cmath>

#include "paddle_like/nn/activations.h"
#include "paddle_like/nn/shape_ops.h"
#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::AwayFromZero;
using testing::ExpectGradientsMatch;
using testing::RandomTensor;

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

TEST(ElementwiseOpsTest, ForwardValues) {
  Variable a(Tensor::FromVector({4}, {-2.0f, 0.25f, 1.0f, 4.0f}));
  auto check = [](StatusOr<Variable> y, std::vector<float> want) {
    ASSERT_TRUE(y.ok()) << y.status();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y->value().f32()[i], want[i], 1e-6) << i;
  };
  check(functional::Exp(a), {std::exp(-2.0f), std::exp(0.25f), std::exp(1.0f), std::exp(4.0f)});
  check(functional::Abs(a), {2.0f, 0.25f, 1.0f, 4.0f});
  check(functional::Pow(a, 2.0f), {4.0f, 0.0625f, 1.0f, 16.0f});
  check(functional::Clamp(a, 0.0f, 2.0f), {0.0f, 0.25f, 1.0f, 2.0f});
  check(functional::Clamp(a, std::nullopt, 0.5f), {-2.0f, 0.25f, 0.5f, 0.5f});
  check(functional::Clamp(a, 0.5f, std::nullopt), {0.5f, 0.5f, 1.0f, 4.0f});
  Variable pos(Tensor::FromVector({3}, {0.25f, 1.0f, 4.0f}));
  check(functional::Log(pos), {std::log(0.25f), 0.0f, std::log(4.0f)});
  check(functional::Sqrt(pos), {0.5f, 1.0f, 2.0f});
  // GELU(x) = x * Phi(x): Phi(0) = 1/2, Phi(1) = 0.841344746.
  check(ApplyGelu(Variable(Tensor::FromVector({3}, {0.0f, 1.0f, -1.0f}))),
        {0.0f, 0.841344746f, -1.0f + 0.841344746f});
  check(functional::Div(pos, Variable(Tensor::FromVector({3}, {0.5f, 4.0f, -2.0f}))), {0.5f, 0.25f, -2.0f});
}

TEST(ElementwiseOpsTest, OutsideTheDomainFollowsIeeeWithoutError) {
  Variable a(Tensor::FromVector({2}, {0.0f, -1.0f}));
  auto log = functional::Log(a);
  ASSERT_TRUE(log.ok());
  EXPECT_TRUE(std::isinf(log->value().f32()[0]) && log->value().f32()[0] < 0);
  EXPECT_TRUE(std::isnan(log->value().f32()[1]));
  auto sqrt = functional::Sqrt(a);
  ASSERT_TRUE(sqrt.ok());
  EXPECT_TRUE(std::isnan(sqrt->value().f32()[1]));
  auto clamp = functional::Clamp(Variable(Tensor::FromVector({1}, {NAN})), 0.0f, 1.0f);
  ASSERT_TRUE(clamp.ok());
  EXPECT_TRUE(std::isnan(clamp->value().f32()[0]));
}

TEST(ElementwiseOpsTest, GradientsMatchFiniteDifferences) {
  Variable a(AwayFromZero({3, 4}, 5), true);                   // |a| >= 0.1: abs is smooth
  Variable p(RandomTensor({3, 4}, 6, 0.5f, 2.0f), true);       // positive for log, sqrt, pow
  Variable q(RandomTensor({3, 4}, 8, 0.5f, 2.0f), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Exp(v[0]); }, {a});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Abs(v[0]); }, {a});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Log(v[0]); }, {p});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Sqrt(v[0]); }, {p});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Pow(v[0], 2.5f); }, {p});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Pow(v[0], -1.0f); }, {p});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Div(v[0], v[1]); }, {p, q});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return ApplyGelu(v[0]); }, {a});
  // Values inside and outside the bounds, each far more than a step from them.
  Variable c(Tensor::FromVector({2, 3}, {-1.0f, -0.3f, 0.2f, 0.8f, 0.45f, -0.6f}), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Clamp(v[0], -0.5f, 0.5f); },
                       {c});
  GELU layer;
  EXPECT_EQ(layer.type_name(), "GELU");
}

TEST(ElementwiseOpsTest, ClampGradientPassesInsideTheBoundsInclusive) {
  Variable a(Tensor::FromVector({4}, {-1.0f, 0.0f, 0.5f, 2.0f}), true);
  auto y = functional::Clamp(a, 0.0f, 1.0f);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Backward(Tensor::Filled({4}, 1.0f)).ok());
  EXPECT_EQ(Values(a.grad()), std::vector<float>({0, 1, 1, 0}));
  EXPECT_STATUS(functional::Clamp(a, std::nullopt, std::nullopt).status(),
                absl::StatusCode::kInvalidArgument, "clamp", "at least one");
}

TEST(TransposeTest, SwapsAnyTwoDimsAndBack) {
  // (2, 3): [[0 1 2] [3 4 5]] -> (3, 2): [[0 3] [1 4] [2 5]].
  Variable m(Tensor::FromVector({2, 3}, {0, 1, 2, 3, 4, 5}));
  auto t = Transpose(m, 0, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), Shape({3, 2}));
  EXPECT_EQ(Values(t->value()), std::vector<float>({0, 3, 1, 4, 2, 5}));
  // (2, 3, 4) with dims 0 and 2 swapped: y[k, j, i] = x[i, j, k].
  Variable x(RandomTensor({2, 3, 4}, 3), true);
  auto y = Transpose(x, -1, 0);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->shape(), Shape({4, 3, 2}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(y->value().f32()[(k * 3 + j) * 2 + i], x.value().f32()[(i * 3 + j) * 4 + k]);
      }
    }
  }
  for (auto [d0, d1] : {std::pair{0, 1}, {1, 2}, {0, 2}}) {
    ExpectGradientsMatch([d0, d1](const std::vector<Variable>& v) { return Transpose(v[0], d0, d1); }, {x});
  }
  auto ids = Transpose(Variable(Tensor::FromIds({1, 2}, {7, 8})), 0, 1);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->value().dtype(), DType::kInt64);
  EXPECT_EQ(ids->shape(), Shape({2, 1}));
  EXPECT_STATUS(Transpose(m, 0, 2).status(), absl::StatusCode::kInvalidArgument, "transpose(0, 2)",
                "out of range for shape [2, 3]");
}

}  // namespace
}  // namespace pl
