// The exchange strategies against two in-process pservers: each applies every step's
// gradients exactly once (SGD values computed by hand), and each is picked when it should be.
#include "paddle_like/client/exchange_strategy.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/client/two_pservers.h"

namespace pl {
namespace {

constexpr float kLr = 0.5f;  // TwoPservers::Client's SGD

TEST_F(TwoPservers, EveryStrategyAppliesEachStepsGradientsOnce) {
  for (const ExchangeChoice choice : {ExchangeChoice{true, false}, ExchangeChoice{false, false},
                                      ExchangeChoice{false, true}}) {
    DenseModel model;
    auto client = Client(&model, 1);
    ASSERT_TRUE(client->Connect().ok());
    std::string why;
    auto strategy = MakeExchangeStrategy(client.get(), model, choice, &why);
    SCOPED_TRACE(strategy->name());
    EXPECT_EQ(why, "");
    float w0 = 0;
    constexpr int kSteps = 3;
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE(strategy->BeforeStep({}).ok());
      if (step == 0) w0 = model.fc->weight().value().f32()[0];
      model.fc->weight().MutableGrad().f32()[0] = 1.0f;  // the step's backward pass
      const SparseIds next;
      ASSERT_TRUE(strategy->AfterStep(1, step + 1 < kSteps ? &next : nullptr).ok());
      EXPECT_FLOAT_EQ(model.fc->weight().grad().f32()[0], 0.0f) << "the gradient did not leave at step " << step;
    }
    ASSERT_TRUE(strategy->Drain().ok());
    ASSERT_TRUE(strategy->PullForEvaluation({}).ok());
    EXPECT_FLOAT_EQ(model.fc->weight().value().f32()[0], w0 - kLr * kSteps * 1.0f);
    for (auto& shard : shards_) shard->WaitForQueuedPushes();
  }
  int64_t applied = 0;
  for (auto& shard : shards_) applied += shard->Counters().pushes_applied;
  EXPECT_EQ(applied, 3 * 3 * 2) << "3 strategies x 3 steps x 2 pservers";
}

TEST_F(TwoPservers, OverlappedStepsUseTheRowsTheirPredecessorPulled) {
  TinyModel model;
  auto client = Client(&model, 1);
  ASSERT_TRUE(client->Connect().ok());
  auto strategy = MakeExchangeStrategy(client.get(), model, ExchangeChoice{false, false});
  ASSERT_STREQ(strategy->name(), "overlapped");
  ASSERT_TRUE(strategy->BeforeStep({{"emb.table", {5}}}).ok());
  const int64_t pulls = client->counters().pulls;
  const float g[2] = {1.0f, 0.0f};
  model.emb->table()->AccumulateGrad(5, g);
  const SparseIds next = {{"emb.table", {5, 7}}};
  ASSERT_TRUE(strategy->AfterStep(1, &next).ok());
  EXPECT_TRUE(model.emb->table()->rows().Contains(7)) << "the next step's rows came with the push";
  const int64_t after_exchange = client->counters().pulls;
  ASSERT_TRUE(strategy->BeforeStep(next).ok());
  EXPECT_EQ(client->counters().pulls, after_exchange) << "the step pulled again what it had";
  EXPECT_GT(after_exchange, pulls);
}

TEST(ExchangeChoiceTest, ThePipelineIsUsedOnlyForAsyncDenseModelsAndSaysWhyNot) {
  DenseModel dense;
  TinyModel sparse;
  EXPECT_TRUE(PicksPipelined({false, true}, dense));
  EXPECT_FALSE(PicksPipelined({false, false}, dense));
  EXPECT_FALSE(PicksPipelined({true, true}, dense));
  EXPECT_FALSE(PicksPipelined({false, true}, sparse));
  // Naming only: the strategies never call the (absent) client before a step.
  std::string why;
  EXPECT_STREQ(MakeExchangeStrategy(nullptr, dense, {true, true}, &why)->name(), "pull-then-push");
  EXPECT_EQ(why, "sync steps must see the previous step");
  EXPECT_STREQ(MakeExchangeStrategy(nullptr, sparse, {false, true}, &why)->name(), "overlapped");
  EXPECT_EQ(why, "the model has sparse tables (each step pulls its own rows)");
}

}  // namespace
}  // namespace pl
