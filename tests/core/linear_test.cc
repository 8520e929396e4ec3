#include "paddle_like/nn/linear.h"

#include <gtest/gtest.h>

#include "tests/testing/gradient_check.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;

class LinearGradTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(LinearGradTest, MatchesFiniteDifferences) {
  auto [batch, in, out] = GetParam();
  Linear layer(in, out);
  layer.InitParameters(7);
  Variable x(RandomTensor({batch, in}, 3), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return layer.Forward(v[0]); }, {x},
                       {layer.weight(), layer.bias()});
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGradTest,
                         ::testing::Values(std::make_tuple(1, 3, 2), std::make_tuple(4, 5, 3),
                                           std::make_tuple(7, 2, 6)));

TEST(LinearTest, WrongInputWidthNamesTheShapes) {
  Linear layer(4, 3);
  Variable x(Tensor::Zeros({2, 5}));
  auto y = layer.Forward(x);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("Linear(4 -> 3)"), std::string::npos);
  EXPECT_NE(y.status().message().find("[2, 5]"), std::string::npos);
}

TEST(LinearTest, SequentialNamesParametersAndTheFailingLayer) {
  Sequential seq;
  seq.Add("fc1", std::make_shared<Linear>(4, 3)).Add("fc2", std::make_shared<Linear>(2, 1));
  auto params = seq.NamedParameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].name, "fc1.w");
  EXPECT_EQ(params[3].name, "fc2.b");
  auto y = seq.Forward(Variable(Tensor::Zeros({2, 4})));
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("layer 'fc2'"), std::string::npos);
}

}  // namespace
}  // namespace pl
