#include "paddle_like/nn/shape_ops.h"

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;

TEST(FlattenTest, KeepsBatchAndSharesStorage) {
  Flatten flat;
  Variable x(RandomTensor({2, 3, 4, 5}, 1), true);
  auto y = flat.Forward(x);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->shape(), (Shape{2, 60}));
  EXPECT_EQ(y->value().f32(), x.value().f32());
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return flat.Forward(v[0]); }, {x});
  Variable one(RandomTensor({1, 3, 2}, 2), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return flat.Forward(v[0]); }, {one});
}

TEST(ReshapeTest, ShapeIsPerExampleWithOneInferredDim) {
  Reshape reshape({1, -1, 3});
  Variable x(RandomTensor({2, 12}, 3), true);
  auto y = reshape.Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 1, 4, 3}));
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return reshape.Forward(v[0]); }, {x});
}

TEST(ReshapeTest, IncompatibleShapeNamesTheLayerAndShapes) {
  Reshape reshape({4, 5});
  auto y = reshape.Forward(Variable(Tensor::Zeros({3, 12})));
  EXPECT_STATUS(y.status(), absl::StatusCode::kInvalidArgument, "Reshape([4, 5])", "[3, 12]",
                "[3, 4, 5]");
}

TEST(ConcatTest, JoinsAlongAnAxis) {
  Variable a(Tensor::FromVector({2, 1}, {1, 2})), b(Tensor::FromVector({2, 2}, {3, 4, 5, 6}));
  auto y = Concat({a, b}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  EXPECT_THAT(std::vector<float>(y->value().f32(), y->value().f32() + 6),
              ::testing::ElementsAre(1, 3, 4, 2, 5, 6));
}

TEST(ConcatTest, GradientsMatchFiniteDifferences) {
  Variable a(RandomTensor({2, 3, 2}, 4), true), b(RandomTensor({2, 1, 2}, 5), true),
      c(RandomTensor({2, 2, 2}, 6), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return Concat(v, 1); }, {a, b, c});
  Variable d(RandomTensor({1, 3, 2}, 7), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return Concat(v, 0); }, {a, d});
  Variable e(RandomTensor({2, 3, 5}, 8), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return Concat(v, -1); }, {a, e});
}

TEST(ConcatTest, OnlyInputsThatRequireGradReceiveIt) {
  Variable a(RandomTensor({2, 2}, 1), true), b(RandomTensor({2, 3}, 2), false);
  auto y = Concat({a, b}, 1);
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Backward(Tensor::Filled({2, 5}, 1.0f)).ok());
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(ConcatTest, MismatchedShapesAreNamed) {
  Variable a(Tensor::Zeros({2, 3})), b(Tensor::Zeros({4, 3}));
  EXPECT_STATUS(Concat({a, b}, 1).status(), absl::StatusCode::kInvalidArgument, "Concat(axis=1)",
                "input 1 has shape [4, 3]", "input 0 has shape [2, 3]");
  EXPECT_STATUS(Concat({a, b}, 2).status(), absl::StatusCode::kInvalidArgument, "axis",
                "[2, 3]");
  EXPECT_STATUS(Concat({}, 0).status(), absl::StatusCode::kInvalidArgument, "no inputs");
}

}  // namespace
}  // namespace pl
