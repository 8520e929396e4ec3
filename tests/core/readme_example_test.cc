// The README's C++ example, compiled and run, so the front page never lies.
#include <gtest/gtest.h>

#include "paddle_like/nn/nn.h"
#include "paddle_like/optim/optimizer.h"
#include "tests/testing/gradient_check.h"

namespace pl {
namespace {

// Two separable classes of 28x28 "images": bright top half vs bright bottom half.
void MakeBatch(int64_t b, uint32_t seed, Tensor* images, Tensor* labels) {
  *images = testing::RandomTensor({b, 1, 28, 28}, seed, 0.0f, 0.3f);
  *labels = Tensor({b}, DType::kInt64);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t cls = i % 2;
    labels->i64()[i] = cls;
    float* img = images->f32() + i * 784;
    for (int r = cls ? 14 : 0; r < (cls ? 28 : 14); ++r) {
      for (int c = 0; c < 28; ++c) img[r * 28 + c] += 0.7f;
    }
  }
}

Status TrainReadmeModel(double* final_loss) {
  Sequential net;
  net.Add("flatten", std::make_shared<Flatten>())
      .Add("fc1", std::make_shared<Linear>(784, 256))
      .Add("relu", std::make_shared<ReLU>())
      .Add("fc2", std::make_shared<Linear>(256, 10));
  net.InitParameters(/*seed=*/1);

  OptimizerSpec adam{OptimizerKind::kAdam, /*learning_rate=*/1e-3f};
  PL_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, Optimizer::Create(&net, adam));
  for (int step = 0; step < 30; ++step) {
    Tensor images, labels;
    MakeBatch(32, step, &images, &labels);
    PL_ASSIGN_OR_RETURN(Variable logits, net.Forward(Variable(images)));
    PL_ASSIGN_OR_RETURN(Variable loss, SoftmaxCrossEntropy(logits, labels));
    PL_RETURN_IF_ERROR(loss.Backward());
    PL_RETURN_IF_ERROR(opt->Step());
    *final_loss = loss.value().f32()[0];
  }
  return absl::OkStatus();
}

TEST(ReadmeExampleTest, TrainsAndTheLossFalls) {
  double loss = 1e9;
  Status s = TrainReadmeModel(&loss);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_LT(loss, 0.1);  // starts near ln(10) = 2.3
}

}  // namespace
}  // namespace pl
