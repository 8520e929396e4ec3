// LayerNorm and BatchNorm: values worked out by hand, running statistics after two
// batches, gradients (input, weight, bias) against finite differences in training
// and evaluation mode, and the buffers BatchNorm keeps.
#include "paddle_like/nn/normalization.h"

#include <cmath>
#include <memory>

#include "tests/nn/nn_test_util.h"

namespace pl {
namespace {

using testing::ExpectGradientsMatch;
using testing::RandomTensor;

constexpr float kEps = 1e-5f;

const Variable& Param(Module& m, const std::string& name) {
  return m.FindParameter(name).value()->var;
}

void Set(const Tensor& t, const std::vector<float>& values) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  std::copy(values.begin(), values.end(), t.f32());
}

TEST(LayerNormTest, NormalisesTheLastDimsThenScalesAndShifts) {
  LayerNorm ln({3});
  EXPECT_EQ(Param(ln, "weight").value().f32()[0], 1.0f);  // ones
  EXPECT_EQ(Param(ln, "bias").value().f32()[0], 0.0f);    // zeros
  Set(Param(ln, "weight").value(), {1, 2, 3});
  Set(Param(ln, "bias").value(), {0, 0, 1});
  // Row 0: mean 2, biased var 2/3. Row 1: mean 2, var (4 + 4 + 16) / 3 = 8.
  auto y = ln.Forward(Variable(Tensor::FromVector({2, 3}, {1, 2, 3, 0, 0, 6})));
  ASSERT_TRUE(y.ok()) << y.status();
  const float r0 = 1.0f / std::sqrt(2.0f / 3 + kEps), r1 = 1.0f / std::sqrt(8.0f + kEps);
  const std::vector<float> want = {-r0, 0, 3 * r0 + 1, -2 * r1, -4 * r1, 3 * 4 * r1 + 1};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y->value().f32()[i], want[i], 1e-5) << i;
}

TEST(LayerNormTest, GradientsMatchFiniteDifferences) {
  LayerNorm ln({3, 4});
  Param(ln, "weight").value().flat() = RandomTensor({12}, 2, 0.5f, 1.5f).flat();
  Param(ln, "bias").value().flat() = RandomTensor({12}, 3).flat();
  Variable x(RandomTensor({2, 3, 4}, 1), true);
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return ln.Forward(v[0]); }, {x},
                       {Param(ln, "weight"), Param(ln, "bias")});
  LayerNorm plain({4}, 1e-5f, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.NamedParameters().empty());
  ExpectGradientsMatch([&](const std::vector<Variable>& v) { return plain.Forward(v[0]); }, {x});
}

TEST(LayerNormTest, ShapeErrorsNameTheLayer) {
  LayerNorm ln({4});
  EXPECT_STATUS(ln.Forward(Variable(Tensor::Zeros({2, 3}))).status(), absl::StatusCode::kInvalidArgument,
                "LayerNorm([4], eps=1e-05)", "last dims are [4], got [2, 3]");
  LayerNorm bad(Shape{});
  EXPECT_STATUS(bad.Forward(Variable(Tensor::Zeros({2, 3}))).status(), absl::StatusCode::kInvalidArgument,
                "normalized_shape must be non-empty");
}

TEST(BatchNormTest, TrainingNormalisesPerChannelAndUpdatesRunningStats) {
  BatchNorm bn(1);
  // (N, C, L) = (2, 1, 2): batch 1 holds 1, 2, 3, 4: mean 2.5, biased var 1.25, unbiased 5/3.
  auto y = bn.Forward(Variable(Tensor::FromVector({2, 1, 2}, {1, 2, 3, 4})));
  ASSERT_TRUE(y.ok()) << y.status();
  const float r = 1.0f / std::sqrt(1.25f + kEps);
  const std::vector<float> want = {-1.5f * r, -0.5f * r, 0.5f * r, 1.5f * r};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y->value().f32()[i], want[i], 1e-5) << i;
  // running = 0.9 running + 0.1 batch: mean 0.25, var 0.9 + 0.1 * 5/3.
  EXPECT_NEAR(bn.running_mean().f32()[0], 0.25f, 1e-6);
  EXPECT_NEAR(bn.running_var().f32()[0], 0.9f + 0.5f / 3, 1e-6);
  // Batch 2 holds 0, 0, 0, 4: mean 1, unbiased var (1 + 1 + 1 + 9) / 3 = 4.
  ASSERT_TRUE(bn.Forward(Variable(Tensor::FromVector({2, 1, 2}, {0, 0, 0, 4}))).ok());
  EXPECT_NEAR(bn.running_mean().f32()[0], 0.9f * 0.25f + 0.1f, 1e-6);
  EXPECT_NEAR(bn.running_var().f32()[0], 0.9f * (0.9f + 0.5f / 3) + 0.4f, 1e-6);
}

TEST(BatchNormTest, EvaluationUsesTheRunningStatistics) {
  BatchNorm bn(2);
  Set(bn.running_mean(), {1, -1});
  Set(bn.running_var(), {4, 0.25f});
  Set(Param(bn, "weight").value(), {2, 1});
  Set(Param(bn, "bias").value(), {0, 1});
  bn.Train(false);
  // c0: (x - 1) / 2 * 2;  c1: (x + 1) / 0.5 + 1.
  auto y = bn.Forward(Variable(Tensor::FromVector({2, 2}, {3, -1, 1, 0})));
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> want = {2, 1, 0, 3};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y->value().f32()[i], want[i], 1e-4) << i;
  EXPECT_EQ(bn.running_mean().f32()[0], 1.0f);  // unchanged in evaluation
}

TEST(BatchNormTest, GradientsMatchFiniteDifferences) {
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 5}, Shape{2, 3, 2, 2}}) {
    SCOPED_TRACE(ShapeToString(shape));
    BatchNorm bn(3);
    Param(bn, "weight").value().flat() = RandomTensor({3}, 4, 0.5f, 1.5f).flat();
    Param(bn, "bias").value().flat() = RandomTensor({3}, 5).flat();
    Variable x(RandomTensor(shape, 6), true);
    const std::vector<Variable> params = {Param(bn, "weight"), Param(bn, "bias")};
    ExpectGradientsMatch([&](const std::vector<Variable>& v) { return bn.Forward(v[0]); }, {x}, params);
    bn.Train(false);
    Set(bn.running_var(), {0.5f, 1.0f, 2.0f});
    ExpectGradientsMatch([&](const std::vector<Variable>& v) { return bn.Forward(v[0]); }, {x}, params);
  }
}

TEST(BatchNormTest, RunningStatisticsAreBuffersNotParameters) {
  auto net = std::make_shared<Sequential>();
  net->Add("bn", std::make_shared<BatchNorm>(2));
  std::vector<std::string> params;
  for (const NamedParameter& np : net->NamedParameters()) params.push_back(np.name);
  EXPECT_EQ(params, std::vector<std::string>({"bn.weight", "bn.bias"}));
  auto buffers = net->NamedBuffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].first, "bn.running_mean");
  EXPECT_EQ(buffers[1].first, "bn.running_var");
  EXPECT_EQ(buffers[1].second.f32()[0], 1.0f);
  // The listed tensors share the layer's storage, and InitParameters leaves them alone.
  buffers[0].second.f32()[1] = 7.0f;
  net->InitParameters(3);
  auto* bn = static_cast<BatchNorm*>(net->layer(0).get());
  EXPECT_EQ(bn->running_mean().f32()[1], 7.0f);
  BatchNorm untracked(2, kEps, 0.1f, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(untracked.NamedBuffers().empty());
  EXPECT_TRUE(untracked.NamedParameters().empty());
  untracked.Train(false);  // batch statistics in every mode
  EXPECT_TRUE(untracked.Forward(Variable(RandomTensor({3, 2}, 1))).ok());
}

TEST(BatchNormTest, ErrorsNameTheLayerAndShape) {
  BatchNorm bn(3);
  EXPECT_STATUS(bn.Forward(Variable(Tensor::Zeros({2, 4}))).status(), absl::StatusCode::kInvalidArgument,
                "BatchNorm(3, eps=1e-05, momentum=0.1)", "(N, 3, ...), got [2, 4]");
  EXPECT_STATUS(bn.Forward(Variable(Tensor::Zeros({1, 3}))).status(), absl::StatusCode::kInvalidArgument,
                "more than 1 value per channel");
}

}  // namespace
}  // namespace pl
