// Single-process training on the real Fashion-MNIST data (prepared by `make data`).
#include <cstdlib>

#include <gtest/gtest.h>

#include "trainer/example_data.h"
#include "trainer/local_trainer.h"

namespace pl {
namespace {

std::string DataDir() {
  const char* d = std::getenv("PL_DATA_DIR");
  return d ? std::string(d) + "/fashion-mnist" : "build/data/fashion-mnist";
}

TEST(LocalTrainingTest, MlpReachesTargetAccuracyOnFashionMnist) {
  auto train = LoadExampleSet(DataDir() + "/train.plrec", TaskKind::kClassification);
  ASSERT_TRUE(train.ok()) << train.status();
  auto test = LoadExampleSet(DataDir() + "/test.plrec", TaskKind::kClassification);
  ASSERT_TRUE(test.ok()) << test.status();
  ASSERT_EQ(test->size(), 10000);

  ModelOptions mo;
  mo.seed = 3;
  auto model = MakeExampleModel("mlp", mo);
  ASSERT_TRUE(model.ok());
  LocalTrainOptions o;
  o.epochs = 2;
  o.batch_size = 64;
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.learning_rate = 1e-3f;
  o.log_every_s = 1e9;
  o.seed = 3;
  std::ostringstream log;
  auto report = TrainLocally(**model, *train, *test, o, log);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(report->final_metric, 0.85) << log.str();
  EXPECT_EQ(report->steps, 2 * ((60000 + 63) / 64));
}

TEST(LocalTrainingTest, MissingDataPathNamesThePath) {
  auto train = LoadExampleSet("/nonexistent/fashion/train.plrec", TaskKind::kClassification);
  ASSERT_FALSE(train.ok());
  EXPECT_EQ(train.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(train.status().message().find("/nonexistent/fashion/train.plrec"), std::string::npos);
}

TEST(LocalTrainingTest, ModelGivenTheWrongInputNamesTheLayerAndShapes) {
  auto model = MakeExampleModel("mlp", {});
  ASSERT_TRUE(model.ok());
  auto out = (*model)->Forward(Tensor::Zeros({4, 1, 20, 20}));  // 400 features, not 784
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("fc1"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("[4, 400]"), std::string::npos) << out.status();
}

TEST(LocalTrainingTest, UnknownModelNamesTheKnownOnes) {
  auto model = MakeExampleModel("resnet", {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(model.status().message(), "unknown model 'resnet' (known: cnn, ctr, mlp)");
}

}  // namespace
}  // namespace pl
