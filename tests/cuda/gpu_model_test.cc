// GpuModel against the CPU path: one step's loss, gradients and optimizer update on
// a small CNN with every supported layer, a short training run on separable data,
// and the errors for unsupported layers and bad batches.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "cuda/gpu_model.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/optim/optimizer.h"
#include "tests/cuda/gpu_test_util.h"

namespace pl::cuda {
namespace {

using ::testing::HasSubstr;
using testing::AllClose;
using testing::RandomTensor;

// (B, 100) inputs viewed as 10x10 images; every layer kind GpuModel supports.
std::shared_ptr<Sequential> SmallCnn() {
  auto m = std::make_shared<Sequential>();
  m->Add("img", std::make_shared<Reshape>(Shape{1, 10, 10}))
      .Add("conv", std::make_shared<Conv2D>(1, 4, 3, 3, 1, 1))
      .Add("relu", std::make_shared<ReLU>())
      .Add("pool", std::make_shared<MaxPool2D>(2))
      .Add("flat", std::make_shared<Flatten>())
      .Add("fc1", std::make_shared<Linear>(100, 16))
      .Add("sig", std::make_shared<Sigmoid>())
      .Add("drop", std::make_shared<Dropout>(0.3f, 5))
      .Add("fc2", std::make_shared<Linear>(16, 12))
      .Add("tanh", std::make_shared<Tanh>())
      .Add("out", std::make_shared<Linear>(12, 3));
  m->InitParameters(3);
  return m;
}

std::vector<Tensor> Snapshot(Module& m, bool grads) {
  std::vector<Tensor> out;
  for (auto& np : m.NamedParameters()) out.push_back((grads ? np.param->var.grad() : np.param->var.value()).Clone());
  return out;
}

TEST(GpuModel, UnsupportedLayerIsNamedBeforeAnyDeviceWork) {
  Sequential m;
  m.Add("fc", std::make_shared<Linear>(4, 4)).Add("emb", std::make_shared<Embedding>(10, 4));
  auto gpu = GpuModel::Create(&m, 0);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(gpu.status().message()),
              HasSubstr("layer 'emb' (Embedding) cannot run on the GPU (supported: Linear, Conv2D"));
}

TEST(GpuModel, OneStepMatchesCpuLossGradientsAndAdamUpdate) {
  PL_SKIP_WITHOUT_GPU();
  auto model = SmallCnn();
  auto* drop = dynamic_cast<Dropout*>(model->layer(7).get());
  ASSERT_NE(drop, nullptr);
  Tensor x = RandomTensor({6, 100}, 1);
  Tensor labels = Tensor::FromIds({6}, {0, 1, 2, 2, 1, 0});
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kAdam;
  spec.learning_rate = 0.01f;
  // Adam's first step is lr * g / (|g| + eps): a larger eps keeps float-rounding
  // differences in near-zero gradients from being amplified into the comparison.
  spec.Set("epsilon", 1e-3f);

  const std::vector<Tensor> p0 = Snapshot(*model, false);
  model->Train(true);
  auto logits = model->Forward(Variable(x));
  ASSERT_TRUE(logits.ok()) << logits.status();
  auto loss = SoftmaxCrossEntropy(*logits, labels);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(loss->Backward().ok());
  const float cpu_loss = loss->value().f32()[0];
  const int64_t cpu_correct = CountCorrect(logits->value(), labels);
  const std::vector<Tensor> cpu_grads = Snapshot(*model, true);
  auto opt = Optimizer::Create(model.get(), spec);
  ASSERT_TRUE(opt.ok());
  ASSERT_TRUE((*opt)->Step().ok());
  const std::vector<Tensor> p1 = Snapshot(*model, false);

  // Back to the starting point, the dropout layer at its first call again.
  auto params = model->NamedParameters();
  for (size_t i = 0; i < params.size(); ++i) ASSERT_TRUE(params[i].param->var.value().CopyFrom(p0[i]).ok());
  model->ZeroGrad();
  drop->Reseed(drop->seed(), 0);

  auto gpu = GpuModel::Create(model.get(), 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto step = (*gpu)->TrainStep(x, labels);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->loss, cpu_loss, 1e-5f);
  EXPECT_EQ(step->correct, cpu_correct);
  EXPECT_EQ(step->examples, 6);
  EXPECT_EQ(drop->calls(), 1u);  // the CPU layer's counter followed the GPU step

  ASSERT_TRUE((*gpu)->CopyGradientsToHost().ok());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(AllClose(params[i].param->var.grad(), cpu_grads[i], 1e-5f, 1e-3f)) << params[i].name;
  }
  ASSERT_TRUE((*gpu)->ApplyOptimizer(spec).ok());
  EXPECT_FALSE((*gpu)->has_gradients());
  ASSERT_TRUE((*gpu)->CopyParametersToHost().ok());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(AllClose(params[i].param->var.value(), p1[i], 1e-5f, 1e-4f)) << params[i].name;
  }
}

TEST(GpuModel, BadBatchesAreRejectedWithTheLayerAndShapes) {
  PL_SKIP_WITHOUT_GPU();
  auto model = SmallCnn();
  auto gpu = GpuModel::Create(model.get(), 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto r = (*gpu)->TrainStep(RandomTensor({2, 100}, 1), Tensor::FromIds({2}, {0, 3}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("label 3 at row 1 is outside [0, 3)"));
  r = (*gpu)->TrainStep(RandomTensor({2, 99}, 1), Tensor::FromIds({2}, {0, 1}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("layer 'img'"));
  r = (*gpu)->TrainStep(RandomTensor({2, 100}, 1), Tensor::FromIds({3}, {0, 1, 2}));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("labels must be an int64 CPU tensor of shape [2]"));
  EXPECT_FALSE((*gpu)->has_gradients());
}

// Four Gaussian blobs in 16-D: linearly separable with a margin.
void MakeBlobs(int64_t n, uint32_t seed, Tensor* x, Tensor* y) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  *x = Tensor({n, 16}, DType::kFloat32);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = i % 4;
    for (int d = 0; d < 16; ++d) {
      const float center = (d % 4 == labels[i]) ? 2.0f : 0.0f;
      x->f32()[i * 16 + d] = center + noise(rng);
    }
  }
  *y = Tensor::FromIds({n}, labels);
}

std::shared_ptr<Sequential> Mlp() {
  auto m = std::make_shared<Sequential>();
  m->Add("fc1", std::make_shared<Linear>(16, 32))
      .Add("relu", std::make_shared<ReLU>())
      .Add("fc2", std::make_shared<Linear>(32, 4));
  m->InitParameters(11);
  return m;
}

TEST(GpuModel, TrainingReachesTheCpuAccuracy) {
  PL_SKIP_WITHOUT_GPU();
  Tensor train_x, train_y, test_x, test_y;
  MakeBlobs(1024, 1, &train_x, &train_y);
  MakeBlobs(512, 2, &test_x, &test_y);
  OptimizerSpec spec;
  spec.kind = OptimizerKind::kMomentum;
  spec.learning_rate = 0.05f;

  auto cpu_model = Mlp();
  auto gpu_host = Mlp();
  auto opt = Optimizer::Create(cpu_model.get(), spec);
  ASSERT_TRUE(opt.ok());
  auto gpu = GpuModel::Create(gpu_host.get(), 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  float cpu_loss = 0, gpu_loss = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int64_t b = 0; b < 1024; b += 64) {
      Tensor xb = train_x.Slice(b, b + 64), yb = train_y.Slice(b, b + 64);
      auto logits = cpu_model->Forward(Variable(xb));
      ASSERT_TRUE(logits.ok());
      auto loss = SoftmaxCrossEntropy(*logits, yb);
      ASSERT_TRUE(loss.ok());
      ASSERT_TRUE(loss->Backward().ok());
      ASSERT_TRUE((*opt)->Step().ok());
      cpu_loss = loss->value().f32()[0];
      auto step = (*gpu)->TrainStep(xb, yb);
      ASSERT_TRUE(step.ok()) << step.status();
      ASSERT_TRUE((*gpu)->ApplyOptimizer(spec).ok());
      gpu_loss = step->loss;
    }
  }
  EXPECT_NEAR(gpu_loss, cpu_loss, 0.02f + 0.05f * cpu_loss);
  auto cpu_logits = cpu_model->Forward(Variable(test_x));
  ASSERT_TRUE(cpu_logits.ok());
  const double cpu_acc = CountCorrect(cpu_logits->value(), test_y) / 512.0;
  auto eval = (*gpu)->Evaluate(test_x, test_y);
  ASSERT_TRUE(eval.ok()) << eval.status();
  const double gpu_acc = eval->correct / 512.0;
  EXPECT_GT(cpu_acc, 0.95);
  EXPECT_GT(gpu_acc, 0.95);
  EXPECT_NEAR(gpu_acc, cpu_acc, 0.01);
  auto logits = (*gpu)->Predict(test_x.Slice(0, 8));
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(logits->shape(), (Shape{8, 4}));
}

}  // namespace
}  // namespace pl::cuda
