// The functional ops against finite differences, a residual block written in C++ with
// them, and their errors naming the op and the shapes.
#include "paddle_like/nn/functional.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/nn/activations.h"
#include "paddle_like/nn/linear.h"
#include "tests/testing/gradient_check.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;
using ::testing::HasSubstr;

TEST(FunctionalTest, ElementwiseOpsMatchFiniteDifferences) {
  Variable a(RandomTensor({3, 4}, 1), true), b(RandomTensor({3, 4}, 2), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Add(v[0], v[1], -0.5f); }, {a, b});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Mul(v[0], v[1]); }, {a, b});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Affine(v[0], 3.0f, 1.0f); }, {a});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Reshape(v[0], {4, -1}); }, {a});
}

TEST(FunctionalTest, ReductionsAndMatMulMatchFiniteDifferences) {
  Variable a(RandomTensor({3, 4}, 3), true), b(RandomTensor({4, 2}, 4), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Sum(v[0]); }, {a});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::Mean(v[0]); }, {a});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return functional::MatMul(v[0], v[1]); }, {a, b});
}

// y = x + fc2(relu(fc1(x))): the residual block a C++ model could not write before.
TEST(FunctionalTest, ResidualBlockMatchesFiniteDifferences) {
  Linear fc1(5, 6), fc2(6, 5);
  fc1.InitParameters(1);
  fc2.InitParameters(2);
  ReLU relu;
  Variable x(RandomTensor({4, 5}, 5), true);
  auto block = [&](const std::vector<Variable>& v) -> StatusOr<Variable> {
    PL_ASSIGN_OR_RETURN(Variable h, fc1.Forward(v[0]));
    PL_ASSIGN_OR_RETURN(h, relu.Forward(h));
    PL_ASSIGN_OR_RETURN(h, fc2.Forward(h));
    return functional::Add(v[0], h);
  };
  ExpectGradientsMatch(block, {x}, {fc1.weight(), fc1.bias(), fc2.weight(), fc2.bias()});
}

TEST(FunctionalTest, ErrorsNameTheOpAndTheShapes) {
  Variable a(RandomTensor({3, 4}, 1)), b(RandomTensor({4, 3}, 2));
  auto add = functional::Add(a, b);
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(add.status().message(), HasSubstr("add: shapes [3, 4] and [4, 3] differ"));
  auto mm = functional::MatMul(a, a);
  ASSERT_FALSE(mm.ok());
  EXPECT_THAT(mm.status().message(), HasSubstr("matmul: expects (M, K) x (K, N), got [3, 4] x [3, 4]"));
  auto reshape = functional::Reshape(a, {5, -1});
  ASSERT_FALSE(reshape.ok());
  EXPECT_THAT(reshape.status().message(), HasSubstr("reshape: cannot view [3, 4]"));
  EXPECT_THAT(functional::Mean(Variable(Tensor({0}, DType::kFloat32))).status().message(), HasSubstr("is empty"));
}

}  // namespace
}  // namespace pl
