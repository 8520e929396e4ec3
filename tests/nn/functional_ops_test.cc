// The functional forms of the layers (torch.nn.functional's layout): linear, conv2d,
// max_pool2d, embedding and dropout over given tensors, against hand-computed values
// or the layers, with gradients against finite differences.
#include <memory>

#include "paddle_like/nn/conv2d.h"
#include "paddle_like/nn/dropout.h"
#include "paddle_like/nn/embedding.h"
#include "paddle_like/nn/linear.h"
#include "paddle_like/nn/pool2d.h"
#include "paddle_like/nn/shape_ops.h"
#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::DistinctValues;
using testing::ExpectGradientsMatch;
using testing::RandomTensor;

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

TEST(LinearOpTest, ComputesXWTransposePlusBias) {
  // x (1, 2) = [1, 2]; w (3, 2) rows [1 0], [0 1], [1 1]; b = [0, 10, 100].
  Variable x(Tensor::FromVector({1, 2}, {1, 2}));
  Variable w(Tensor::FromVector({3, 2}, {1, 0, 0, 1, 1, 1}));
  Variable b(Tensor::FromVector({3}, {0, 10, 100}));
  auto y = LinearOp(x, w, b);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Values(y->value()), std::vector<float>({1, 12, 103}));
  auto nb = LinearOp(x, w, Variable());
  ASSERT_TRUE(nb.ok());
  EXPECT_EQ(Values(nb->value()), std::vector<float>({1, 2, 3}));
  // Leading dims are kept: (2, 2, 2) -> (2, 2, 3).
  auto r3 = LinearOp(Variable(RandomTensor({2, 2, 2}, 1)), w, b);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->shape(), Shape({2, 2, 3}));
}

TEST(LinearOpTest, GradientsMatchFiniteDifferencesAndTheLayer) {
  Variable x(RandomTensor({4, 3}, 1), true), w(RandomTensor({2, 3}, 2), true), b(RandomTensor({2}, 3), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return LinearOp(v[0], v[1], v[2]); }, {x, w, b});
  Variable x3(RandomTensor({2, 2, 3}, 4), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return LinearOp(v[0], v[1], Variable()); }, {x3, w});
  // The layer stores W as (in, out): the op over its transpose gives the same output.
  Linear layer(3, 2);
  layer.InitParameters(7);
  auto wt = Transpose(layer.weight(), 0, 1);
  ASSERT_TRUE(wt.ok());
  auto want = layer.Forward(x);
  auto got = LinearOp(x, *wt, layer.bias());
  ASSERT_TRUE(want.ok() && got.ok());
  for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR(got->value().f32()[i], want->value().f32()[i], 1e-6);
  EXPECT_STATUS(LinearOp(x, Variable(RandomTensor({2, 4}, 5)), Variable()).status(),
                absl::StatusCode::kInvalidArgument, "linear", "x [4, 3], weight [2, 4], bias None");
}

TEST(Conv2dOpTest, MatchesTheLayerAndFiniteDifferences) {
  Conv2D layer(2, 3, 3, 3, /*stride=*/2, /*padding=*/1);
  layer.InitParameters(4);
  Variable x(RandomTensor({2, 2, 5, 5}, 1), true);
  auto want = layer.Forward(x);
  auto got = Conv2dOp(x, layer.weight(), layer.bias(), 2, 1);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ(got->shape(), want->shape());
  EXPECT_EQ(Values(got->value()), Values(want->value()));
  Variable w(RandomTensor({3, 2, 2, 2}, 2), true), b(RandomTensor({3}, 3), true);
  Variable small(RandomTensor({1, 2, 4, 4}, 5), true);
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return Conv2dOp(v[0], v[1], v[2], 1, 1); },
                       {small, w, b});
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return Conv2dOp(v[0], v[1], Variable(), 2, 0); },
                       {small, w});
  EXPECT_STATUS(Conv2dOp(small, Variable(RandomTensor({3, 1, 2, 2}, 6)), Variable()).status(),
                absl::StatusCode::kInvalidArgument, "conv2d(stride=1, padding=0)", "weight float32 [3, 1, 2, 2]");
}

TEST(MaxPool2dOpTest, MatchesTheLayer) {
  Variable x(DistinctValues({1, 2, 4, 4}, 3), true);
  auto y = MaxPool2dOp(x, 2);
  auto want = MaxPool2D(2).Forward(x);
  ASSERT_TRUE(y.ok() && want.ok());
  EXPECT_EQ(Values(y->value()), Values(want->value()));
  ExpectGradientsMatch([](const std::vector<Variable>& v) { return MaxPool2dOp(v[0], 2, 1); }, {x});
}

TEST(EmbeddingOpTest, GathersRowsWithADenseGradient) {
  // weight (3, 2) rows [0 1], [10 11], [20 21].
  Variable w(Tensor::FromVector({3, 2}, {0, 1, 10, 11, 20, 21}), true);
  const Tensor ids = Tensor::FromIds({2, 2}, {2, 0, 2, 1});
  auto y = EmbeddingOp(ids, w);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({2, 2, 2}));
  EXPECT_EQ(Values(y->value()), std::vector<float>({20, 21, 0, 1, 20, 21, 10, 11}));
  ASSERT_TRUE(y->Backward(Tensor::Filled({2, 2, 2}, 1.0f)).ok());
  EXPECT_EQ(Values(w.grad()), std::vector<float>({1, 1, 1, 1, 2, 2}));  // row 2 used twice
  Variable rw(RandomTensor({4, 3}, 1), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return EmbeddingOp(ids, v[0]); }, {rw});
  EXPECT_STATUS(EmbeddingOp(Tensor::FromIds({1}, {3}), w).status(), absl::StatusCode::kInvalidArgument,
                "embedding: id 3 at index 0 is outside [0, 3)");
}

TEST(DropoutOpTest, SeededMasksAndTheIdentityWhenOff) {
  Variable x(Tensor::Filled({1000}, 1.0f), true);
  auto off = DropoutOp(x, 0.5f, /*training=*/false, 1);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->node(), x.node());
  auto a = DropoutOp(x, 0.25f, true, 7), b = DropoutOp(x, 0.25f, true, 7), c = DropoutOp(x, 0.25f, true, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(Values(a->value()), Values(b->value()));
  EXPECT_NE(Values(a->value()), Values(c->value()));
  int zeros = 0;
  for (float v : Values(a->value())) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6) << v;
    zeros += v == 0.0f;
  }
  EXPECT_NEAR(zeros, 250, 60);
  ASSERT_TRUE(a->Backward(Tensor::Filled({1000}, 1.0f)).ok());
  EXPECT_EQ(Values(x.grad()), Values(a->value()));  // gy * mask, and x is all ones
  auto all = DropoutOp(x, 1.0f, true, 3);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Values(all->value()), std::vector<float>(1000, 0.0f));
  EXPECT_STATUS(DropoutOp(x, 1.5f, true, 0).status(), absl::StatusCode::kInvalidArgument,
                "dropout(p=1.5)", "[0, 1]");
}

}  // namespace
}  // namespace pl
