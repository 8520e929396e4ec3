#include "paddle_like/nn/activations.h"

#include <cmath>

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::AwayFromZero;
using testing::ExpectGradientsMatch;

struct ActCase {
  const char* name;
  std::function<std::shared_ptr<Layer>()> make;
  std::function<float(float)> f;
  std::function<float(float)> df;
};

std::vector<ActCase> Cases() {
  auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  return {
      {"ReLU", [] { return std::make_shared<ReLU>(); }, [](float x) { return x > 0 ? x : 0.0f; },
       [](float x) { return x > 0 ? 1.0f : 0.0f; }},
      {"Sigmoid", [] { return std::make_shared<Sigmoid>(); }, sig,
       [sig](float x) { return sig(x) * (1 - sig(x)); }},
      {"Tanh", [] { return std::make_shared<Tanh>(); }, [](float x) { return std::tanh(x); },
       [](float x) { return 1 - std::tanh(x) * std::tanh(x); }},
  };
}

TEST(ActivationsTest, GradientsMatchFiniteDifferences) {
  for (const ActCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto layer = c.make();
    for (const Shape& shape : {Shape{1, 3}, Shape{2, 3, 4}, Shape{5}}) {
      Variable x(AwayFromZero(shape, 11), true);
      ExpectGradientsMatch([&](const std::vector<Variable>& v) { return layer->Forward(v[0]); },
                           {x});
    }
  }
}

// A tensor big enough to take the multi-threaded path, against scalar references.
TEST(ActivationsTest, LargeTensorMatchesScalarReference) {
  const Shape shape{3, 40000};
  for (const ActCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto layer = c.make();
    Variable x(AwayFromZero(shape, 5), true);
    auto y = layer->Forward(x);
    ASSERT_TRUE(y.ok()) << y.status();
    Tensor seed = testing::RandomTensor(shape, 6);
    ASSERT_TRUE(y->Backward(seed).ok());
    for (int64_t i = 0; i < x.value().numel(); i += 997) {
      const float xi = x.value().f32()[i];
      EXPECT_NEAR(y->value().f32()[i], c.f(xi), 1e-5f) << i;
      EXPECT_NEAR(x.grad().f32()[i], seed.f32()[i] * c.df(xi), 1e-5f) << i;
    }
  }
}

TEST(ActivationsTest, SigmoidAndTanhSaturateWithoutOverflow) {
  Variable x(Tensor::FromVector({4}, {-500.0f, -100.0f, 100.0f, 500.0f}), true);
  auto s = ApplySigmoid(x);
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->value().f32()[0], 0.0f);
  EXPECT_FLOAT_EQ(s->value().f32()[3], 1.0f);
  auto t = ApplyTanh(x);
  ASSERT_TRUE(t.ok());
  EXPECT_FLOAT_EQ(t->value().f32()[0], -1.0f);
  ASSERT_TRUE(s->Backward(Tensor::Filled({4}, 1.0f)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(x.grad().f32()[i]));
}

TEST(ActivationsTest, ReluGradientIsZeroForNegativeInputs) {
  Variable x(Tensor::FromVector({4}, {-2.0f, -0.5f, 0.5f, 3.0f}), true);
  auto y = ApplyRelu(x);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Backward(Tensor::Filled({4}, 2.0f)).ok());
  EXPECT_THAT(std::vector<float>(y->value().f32(), y->value().f32() + 4),
              ::testing::ElementsAre(0.0f, 0.0f, 0.5f, 3.0f));
  EXPECT_THAT(std::vector<float>(x.grad().f32(), x.grad().f32() + 4),
              ::testing::ElementsAre(0.0f, 0.0f, 2.0f, 2.0f));
}

TEST(ActivationsTest, IntegerInputNamesTheLayerAndShape) {
  ReLU relu;
  auto y = relu.Forward(Variable(Tensor::FromIds({2, 2}, {1, 2, 3, 4})));
  EXPECT_STATUS(y.status(), absl::StatusCode::kInvalidArgument, "ReLU", "int64", "[2, 2]");
}

}  // namespace
}  // namespace pl
