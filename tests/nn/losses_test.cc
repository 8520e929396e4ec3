#include "paddle_like/nn/losses.h"

#include <cmath>

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;

TEST(SoftmaxCrossEntropyTest, MatchesHandComputedValue) {
  // Row 0: log(e^1 + e^2 + e^3) - 3 = 0.4076059; row 1: log 3 = 1.0986123.
  Variable logits(Tensor::FromVector({2, 3}, {1, 2, 3, 1, 1, 1}), true);
  auto loss = SoftmaxCrossEntropy(logits, Tensor::FromIds({2}, {2, 0}));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(loss->value().numel(), 1);
  EXPECT_NEAR(loss->value().f32()[0], (0.4076059 + 1.0986123) / 2, 1e-6);
  ASSERT_TRUE(loss->Backward().ok());
  // dL/dz = (softmax - onehot) / B; row 1 is uniform: (1/3 - 1) / 2 for the label.
  EXPECT_NEAR(logits.grad().f32()[3], (1.0 / 3 - 1) / 2, 1e-6);
  EXPECT_NEAR(logits.grad().f32()[4], (1.0 / 3) / 2, 1e-6);
}

TEST(SoftmaxCrossEntropyTest, LargeLogitsStayFinite) {
  Variable logits(Tensor::FromVector({1, 2}, {1000, 0}), true);
  auto loss = SoftmaxCrossEntropy(logits, Tensor::FromIds({1}, {1}));
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(loss->value().f32()[0], 1000.0f, 1e-3);
  ASSERT_TRUE(loss->Backward().ok());
  EXPECT_NEAR(logits.grad().f32()[0], 1.0f, 1e-6);
  EXPECT_NEAR(logits.grad().f32()[1], -1.0f, 1e-6);
}

TEST(SoftmaxCrossEntropyTest, GradientsMatchFiniteDifferences) {
  for (int64_t b : {1, 4}) {
    Variable logits(RandomTensor({b, 5}, 3, -2, 2), true);
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < b; ++i) labels.push_back((i * 3) % 5);
    const Tensor y = Tensor::FromIds({b}, labels);
    ExpectGradientsMatch(
        [&](const std::vector<Variable>& v) { return SoftmaxCrossEntropy(v[0], y); }, {logits});
  }
}

TEST(SoftmaxCrossEntropyTest, BadLabelsAndShapesAreNamed) {
  Variable logits(Tensor::Zeros({2, 3}), true);
  EXPECT_STATUS(SoftmaxCrossEntropy(logits, Tensor::FromIds({2}, {0, 5})).status(),
                absl::StatusCode::kInvalidArgument, "label 5 at index 1", "[0, 3)");
  EXPECT_STATUS(SoftmaxCrossEntropy(logits, Tensor::FromIds({3}, {0, 1, 2})).status(),
                absl::StatusCode::kInvalidArgument, "[2]", "[3]");
  EXPECT_STATUS(SoftmaxCrossEntropy(Variable(Tensor::Zeros({6})), Tensor::FromIds({1}, {0}))
                    .status(),
                absl::StatusCode::kInvalidArgument, "[B, K]", "[6]");
}

TEST(SigmoidBinaryCrossEntropyTest, MatchesHandComputedValue) {
  // z=0, t=1: log 2 = 0.6931472;  z=2, t=0: 2 + log(1 + e^-2) = 2.1269280.
  Variable logits(Tensor::FromVector({2}, {0, 2}), true);
  auto loss = SigmoidBinaryCrossEntropy(logits, Tensor::FromVector({2}, {1, 0}));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->value().f32()[0], (0.6931472 + 2.1269280) / 2, 1e-6);
  ASSERT_TRUE(loss->Backward().ok());
  EXPECT_NEAR(logits.grad().f32()[0], (0.5 - 1) / 2, 1e-6);
  EXPECT_NEAR(logits.grad().f32()[1], (1 / (1 + std::exp(-2.0))) / 2, 1e-6);
}

TEST(SigmoidBinaryCrossEntropyTest, StableAndAcceptsColumnLogits) {
  Variable logits(Tensor::FromVector({2, 1}, {-100, 100}), true);
  auto loss = SigmoidBinaryCrossEntropy(logits, Tensor::FromVector({2}, {1, 1}));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->value().f32()[0], 50.0f, 1e-4);
  ASSERT_TRUE(loss->Backward().ok());
  EXPECT_NEAR(logits.grad().f32()[0], -0.5f, 1e-6);
}

TEST(SigmoidBinaryCrossEntropyTest, GradientsMatchFiniteDifferences) {
  for (const Shape& shape : {Shape{1}, Shape{5}, Shape{4, 1}}) {
    Variable logits(RandomTensor(shape, 8, -3, 3), true);
    std::vector<float> t;
    for (int64_t i = 0; i < shape[0]; ++i) t.push_back(i % 2 ? 1.0f : 0.0f);
    const Tensor labels = Tensor::FromVector({shape[0]}, t);
    ExpectGradientsMatch(
        [&](const std::vector<Variable>& v) { return SigmoidBinaryCrossEntropy(v[0], labels); },
        {logits});
  }
}

TEST(SigmoidBinaryCrossEntropyTest, BadLabelsAreNamed) {
  Variable logits(Tensor::Zeros({3}), true);
  EXPECT_STATUS(SigmoidBinaryCrossEntropy(logits, Tensor::FromVector({3}, {0, 2, 1})).status(),
                absl::StatusCode::kInvalidArgument, "label 2 at index 1", "[0, 1]");
  EXPECT_STATUS(SigmoidBinaryCrossEntropy(logits, Tensor::FromIds({3}, {0, 1, 1})).status(),
                absl::StatusCode::kInvalidArgument, "float32 labels", "int64 [3]");
  EXPECT_STATUS(SigmoidBinaryCrossEntropy(Variable(Tensor::Zeros({3, 2})),
                                          Tensor::FromVector({3}, {0, 1, 1}))
                    .status(),
                absl::StatusCode::kInvalidArgument, "[B] or [B, 1]", "[3, 2]");
}

TEST(PredictionHelpersTest, SoftmaxSigmoidAndCountCorrect) {
  Tensor z = Tensor::FromVector({2, 3}, {1, 2, 3, 5, 0, 0});
  Tensor p = Softmax(z);
  EXPECT_NEAR(p.f32()[0] + p.f32()[1] + p.f32()[2], 1.0f, 1e-6);
  EXPECT_NEAR(p.f32()[2], std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
  EXPECT_FLOAT_EQ(SigmoidOf(Tensor::FromVector({1}, {0})).f32()[0], 0.5f);
  EXPECT_EQ(CountCorrect(z, Tensor::FromIds({2}, {2, 1})), 1);
  EXPECT_EQ(CountCorrect(z, Tensor::FromIds({2}, {2, 0})), 2);
  EXPECT_EQ(CountCorrect(Tensor::FromVector({3}, {-1, 2, 0.5}), Tensor::FromVector({3}, {0, 1, 0})),
            2);
  EXPECT_EQ(CountCorrect(z, Tensor::FromIds({3}, {0, 0, 0})), -1);
}

TEST(RegressionLossesTest, MseAndL1MatchHandComputedValues) {
  // diff = pred - target = [1, -2, 0.5, 0]: squares 1, 4, 0.25, 0; abs 1, 2, 0.5, 0.
  Variable pred(Tensor::FromVector({2, 2}, {1, 0, 2.5f, 3}), true);
  Variable target(Tensor::FromVector({2, 2}, {0, 2, 2, 3}), true);
  auto mse = MSELoss(pred, target);
  ASSERT_TRUE(mse.ok()) << mse.status();
  EXPECT_EQ(mse->value().rank(), 0);
  EXPECT_FLOAT_EQ(mse->value().f32()[0], 5.25f / 4);
  ASSERT_TRUE(mse->Backward().ok());
  // d/dpred = 2 diff / 4; d/dtarget is its negative.
  EXPECT_FLOAT_EQ(pred.grad().f32()[1], -1.0f);
  EXPECT_FLOAT_EQ(target.grad().f32()[1], 1.0f);
  auto sum = MSELoss(pred, target, Reduction::kSum);
  ASSERT_TRUE(sum.ok());
  EXPECT_FLOAT_EQ(sum->value().f32()[0], 5.25f);
  auto none = L1Loss(pred, target, Reduction::kNone);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shape(), Shape({2, 2}));
  EXPECT_FLOAT_EQ(none->value().f32()[1], 2.0f);
  auto l1 = L1Loss(pred, target);
  ASSERT_TRUE(l1.ok());
  EXPECT_FLOAT_EQ(l1->value().f32()[0], 3.5f / 4);
  EXPECT_STATUS(MSELoss(pred, Variable(Tensor::Zeros({4}))).status(), absl::StatusCode::kInvalidArgument,
                "mse_loss", "[2, 2]", "[4]");
  EXPECT_EQ(ParseReduction("sum").value(), Reduction::kSum);
  EXPECT_STATUS(ParseReduction("avg").status(), absl::StatusCode::kInvalidArgument, "'avg'");
}

TEST(RegressionLossesTest, GradientsMatchFiniteDifferences) {
  Variable pred(RandomTensor({3, 4}, 1), true);
  Variable target(testing::AwayFromZero({3, 4}, 2), true);  // diff: keep away from L1's kink
  for (int64_t i = 0; i < 12; ++i) target.value().f32()[i] += pred.value().f32()[i];
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    ExpectGradientsMatch([r](const std::vector<Variable>& v) { return MSELoss(v[0], v[1], r); }, {pred, target});
    ExpectGradientsMatch([r](const std::vector<Variable>& v) { return L1Loss(v[0], v[1], r); }, {pred, target});
  }
}

TEST(NLLLossTest, PicksTheTargetLogProbabilities) {
  // -(lp[0, 2] + lp[1, 0]) / 2 with lp row 0 = [-3, -2, -1], row 1 = [-0.5, -1, -2].
  Variable lp(Tensor::FromVector({2, 3}, {-3, -2, -1, -0.5f, -1, -2}), true);
  const Tensor t = Tensor::FromIds({2}, {2, 0});
  auto loss = NLLLoss(lp, t);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_FLOAT_EQ(loss->value().f32()[0], 0.75f);
  ASSERT_TRUE(loss->Backward().ok());
  EXPECT_FLOAT_EQ(lp.grad().f32()[2], -0.5f);
  EXPECT_FLOAT_EQ(lp.grad().f32()[3], -0.5f);
  EXPECT_FLOAT_EQ(lp.grad().f32()[0], 0.0f);
  auto none = NLLLoss(lp, t, Reduction::kNone);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shape(), Shape({2}));
  EXPECT_FLOAT_EQ(none->value().f32()[1], 0.5f);
  // ignore_index rows count neither in the sum nor in the mean's divisor.
  auto ignored = NLLLoss(lp, Tensor::FromIds({2}, {-100, 1}));
  ASSERT_TRUE(ignored.ok());
  EXPECT_FLOAT_EQ(ignored->value().f32()[0], 1.0f);
  for (Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    Variable x(RandomTensor({4, 5}, 3), true);
    const Tensor ids = Tensor::FromIds({4}, {1, -100, 4, 0});
    ExpectGradientsMatch([&](const std::vector<Variable>& v) { return NLLLoss(v[0], ids, r); }, {x});
  }
  EXPECT_STATUS(NLLLoss(lp, Tensor::FromIds({2}, {0, 3})).status(), absl::StatusCode::kInvalidArgument,
                "nll_loss: target 3 at index 1 is outside [0, 3)");
  EXPECT_STATUS(NLLLoss(lp, Tensor::FromIds({3}, {0, 1, 2})).status(), absl::StatusCode::kInvalidArgument,
                "nll_loss", "[2]", "[3]");
}

}  // namespace
}  // namespace pl
