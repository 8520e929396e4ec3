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

}  // namespace
}  // namespace pl
