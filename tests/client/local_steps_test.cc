// Local steps (paddle_like/client/local_steps.h) against two in-process pservers: a
// round's K optimizer steps are taken on the trainer, their change is what the
// pservers add (async: each trainer's as it comes; sync: the average), checked against
// the steps computed by hand; a task's unfinished round is pushed too; and what cannot
// take local steps is refused naming the flag.
#include "paddle_like/client/local_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "paddle_like/optim/optimizer.h"
#include "tests/client/two_pservers.h"

namespace pl {
namespace {

using ::testing::HasSubstr;

constexpr float kLocalLr = 0.25f;  // exact in binary: the hand computation below is exact

class LocalStepsTest : public TwoPservers {
 protected:
  std::unique_ptr<ParameterClient> MakeClient(Module* model, int64_t trainer_id, bool sync) {
    ParameterClientOptions o;
    o.num_pservers = 2;
    o.optimizer.kind = OptimizerKind::kSGD;
    o.optimizer.learning_rate = 0.5f;  // the pservers' rule: unused by changes
    o.seed = 9;
    o.sync = sync;
    auto client = std::make_unique<ParameterClient>(
        model, o, [this]() -> StatusOr<std::vector<std::string>> { return addresses_; });
    client->set_trainer_id(trainer_id);
    return client;
  }
  static std::unique_ptr<Optimizer> LocalSgd(Module* m) {
    OptimizerSpec spec;
    spec.kind = OptimizerKind::kSGD;
    spec.learning_rate = kLocalLr;
    auto opt = Optimizer::Create(m, spec);
    EXPECT_TRUE(opt.ok()) << opt.status();
    return std::move(opt).value();
  }
  // Gradient `scale` * (1, 2, 3, ...) on every dense parameter, then one local step.
  static void LocalStep(DenseModel& m, Optimizer& opt, float scale) {
    for (const NamedParameter& np : m.NamedParameters()) {
      const Tensor& g = np.param->var.MutableGrad();
      for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] = scale * static_cast<float>(i + 1);
    }
    ASSERT_TRUE(opt.Step().ok());
  }
  static std::vector<float> Weights(DenseModel& m) {
    const Tensor& w = m.fc->weight().value();
    return std::vector<float>(w.f32(), w.f32() + w.numel());
  }
};

TEST_F(LocalStepsTest, AsyncAddsEachTrainersRoundOfLocalStepsAsItComes) {
  DenseModel a, b, probe;
  auto ca = MakeClient(&a, 1, false), cb = MakeClient(&b, 2, false), cp = MakeClient(&probe, 3, false);
  for (auto* c : {ca.get(), cb.get(), cp.get()}) ASSERT_TRUE(c->Connect().ok());
  auto oa = LocalSgd(&a), ob = LocalSgd(&b);
  LocalSteps la(ca.get(), 2), lb(cb.get(), 2);
  ASSERT_TRUE(la.Start().ok());
  ASSERT_TRUE(lb.Start().ok());
  const std::vector<float> w0 = Weights(a);
  ASSERT_EQ(Weights(b), w0);

  // a: gradients 1x then 2x: w0 - 0.25 * 3 * (i+1) after two steps, pushed at the second.
  LocalStep(a, *oa, 1.0f);
  auto ended = la.EndStep(1);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_FALSE(*ended);
  ASSERT_TRUE(cp->Pull({}).ok());
  EXPECT_EQ(Weights(probe), w0) << "nothing is pushed before the K-th step";
  LocalStep(a, *oa, 2.0f);
  ended = la.EndStep(1);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_TRUE(*ended);
  EXPECT_EQ(la.rounds(), 1);
  // b, from w0 too: gradients -1x twice, +0.5 (i+1) in all; its pull brings a's change too.
  LocalStep(b, *ob, -1.0f);
  ASSERT_TRUE(lb.EndStep(1).ok());
  LocalStep(b, *ob, -1.0f);
  ASSERT_TRUE(lb.EndStep(1).ok());
  const std::vector<float> wb = Weights(b);
  ASSERT_TRUE(cp->Pull({}).ok());
  for (size_t i = 0; i < w0.size(); ++i) {
    const float want = w0[i] - kLocalLr * 3.0f * (i + 1) + kLocalLr * 2.0f * (i + 1);
    EXPECT_NEAR(Weights(probe)[i], want, 1e-5) << i;
    EXPECT_EQ(wb[i], Weights(probe)[i]) << "b's pull is the merged value, its next base";
  }
  // The gradient tensors are zero again: the changes left with their pushes.
  EXPECT_EQ(a.fc->weight().grad().f32()[0], 0.0f);
}

// With N live trainers an async round's change counts 1/N (set_merge_scale, as
// Paddle's GEO): two trainers' rounds from the same base move it by their mean.
TEST_F(LocalStepsTest, AsyncChangesAreScaledByTheMergeScale) {
  DenseModel a, b, probe;
  auto ca = MakeClient(&a, 1, false), cb = MakeClient(&b, 2, false), cp = MakeClient(&probe, 3, false);
  for (auto* c : {ca.get(), cb.get(), cp.get()}) ASSERT_TRUE(c->Connect().ok());
  auto oa = LocalSgd(&a), ob = LocalSgd(&b);
  LocalSteps la(ca.get(), 1), lb(cb.get(), 1);
  la.set_merge_scale(0.5f);
  lb.set_merge_scale(0.5f);
  ASSERT_TRUE(la.Start().ok());
  ASSERT_TRUE(lb.Start().ok());
  const std::vector<float> w0 = Weights(a);
  // a: -0.25 * 2 (i+1); b: -0.25 * 4 (i+1); merged: w0 - 0.25 * 3 (i+1).
  LocalStep(a, *oa, 2.0f);
  ASSERT_TRUE(la.EndStep(1).ok());
  LocalStep(b, *ob, 4.0f);
  ASSERT_TRUE(lb.EndStep(1).ok());
  ASSERT_TRUE(cp->Pull({}).ok());
  for (size_t i = 0; i < w0.size(); ++i) {
    EXPECT_NEAR(Weights(probe)[i], w0[i] - kLocalLr * 3.0f * (i + 1), 1e-5) << i;
  }
}

// Overlapped rounds (async): a round's push and pull run while the next round computes;
// at that round's end the pulled values replace the ones it started from and its own
// progress is kept on top; what the pull brought is never pushed back.
TEST_F(LocalStepsTest, OverlappedRoundsRebaseTheirProgressOntoWhatThePullBrought) {
  DenseModel a, b, probe;
  auto ca = MakeClient(&a, 1, false), cb = MakeClient(&b, 2, false), cp = MakeClient(&probe, 3, false);
  for (auto* c : {ca.get(), cb.get(), cp.get()}) ASSERT_TRUE(c->Connect().ok());
  auto oa = LocalSgd(&a), ob = LocalSgd(&b);
  LocalSteps la(ca.get(), 2, /*overlap=*/true), lb(cb.get(), 1);
  ASSERT_TRUE(la.Start().ok());
  ASSERT_TRUE(lb.Start().ok());
  const std::vector<float> w0 = Weights(a);
  // b's change lands first: -0.25 * -4 (i+1) = +(i+1).
  LocalStep(b, *ob, -4.0f);
  ASSERT_TRUE(lb.EndStep(1).ok());
  // a's first round: 1x then 2x, a change of -0.75 (i+1), sent in the background; a keeps
  // computing on its own values meanwhile.
  LocalStep(a, *oa, 1.0f);
  ASSERT_TRUE(la.EndStep(1).ok());
  LocalStep(a, *oa, 2.0f);
  auto ended = la.EndStep(1);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_TRUE(*ended);
  EXPECT_TRUE(ca->exchange_in_flight());
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(Weights(a)[i], w0[i] - 0.75f * (i + 1), 1e-5) << i;
  // The second round (1x twice, -0.5 (i+1)) ends on the first round's pull: w0 + b's +
  // a's first change, plus the second round's progress.
  LocalStep(a, *oa, 1.0f);
  ASSERT_TRUE(la.EndStep(1).ok());
  LocalStep(a, *oa, 1.0f);
  ASSERT_TRUE(la.EndStep(1).ok());
  for (size_t i = 0; i < w0.size(); ++i) {
    EXPECT_NEAR(Weights(a)[i], w0[i] + (1.0f - 0.75f - 0.5f) * (i + 1), 1e-5) << "rebased, element " << i;
  }
  // The task's end waits for the second round's exchange: the pservers hold all three
  // changes once each, and so does a.
  auto finished = la.Finish();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_FALSE(ca->exchange_in_flight());
  ASSERT_TRUE(cp->Pull({}).ok());
  for (size_t i = 0; i < w0.size(); ++i) {
    EXPECT_NEAR(Weights(probe)[i], w0[i] + (1.0f - 0.75f - 0.5f) * (i + 1), 1e-5) << i;
    EXPECT_EQ(Weights(a)[i], Weights(probe)[i]) << i;
  }
}

TEST_F(LocalStepsTest, SyncAveragesTheTrainersRoundsAndAPartialRoundIsPushed) {
  for (auto& shard : shards_) {
    // Sync needs the live trainers; the shards learn the mode from the first Init.
    shard->SetLiveTrainers({1, 2});
  }
  DenseModel a, b;
  auto ca = MakeClient(&a, 1, true), cb = MakeClient(&b, 2, true);
  ASSERT_TRUE(ca->Connect().ok());
  ASSERT_TRUE(cb->Connect().ok());
  auto oa = LocalSgd(&a), ob = LocalSgd(&b);
  LocalSteps la(ca.get(), 3), lb(cb.get(), 3);
  ASSERT_TRUE(la.Start().ok());
  ASSERT_TRUE(lb.Start().ok());
  const std::vector<float> w0 = Weights(a);
  // a takes 3 steps (1x each); b takes 1 step (4x) and its task ends: Finish pushes it.
  std::thread ta([&] {
    for (int s = 0; s < 3; ++s) {
      LocalStep(a, *oa, 1.0f);
      auto e = la.EndStep(1);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ(*e, s == 2);
    }
  });
  LocalStep(b, *ob, 4.0f);
  ASSERT_TRUE(lb.EndStep(1).ok());
  auto finished = lb.Finish();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(*finished);
  ta.join();
  // a's change: -0.25 * 3 (i+1); b's: -0.25 * 4 (i+1); the step adds their mean.
  for (size_t i = 0; i < w0.size(); ++i) {
    const float want = w0[i] - kLocalLr * 3.5f * (i + 1);
    EXPECT_NEAR(Weights(a)[i], want, 1e-5) << i;
    EXPECT_EQ(Weights(a)[i], Weights(b)[i]) << "both pulled the same step";
  }
  auto nothing = lb.Finish();
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(*nothing) << "no step taken since: nothing to push";
}

TEST_F(LocalStepsTest, WhatCannotTakeLocalStepsIsRefusedNamingTheFlag) {
  DenseModel dense;
  TinyModel sparse;
  EXPECT_TRUE(ValidateLocalSteps(1, *KeyStore::Of(sparse), true).ok());
  EXPECT_TRUE(ValidateLocalSteps(4, *KeyStore::Of(dense), false).ok());
  Status s = ValidateLocalSteps(0, *KeyStore::Of(dense), false);
  EXPECT_THAT(s.message(), HasSubstr("--local_steps must be >= 1, got 0"));
  s = ValidateLocalSteps(2, *KeyStore::Of(sparse), false);
  EXPECT_THAT(s.message(), HasSubstr("'emb.table' is a sparse table"));
  s = ValidateLocalSteps(2, *KeyStore::Of(dense), true);
  EXPECT_THAT(s.message(), HasSubstr("--pipeline"));
  // The client refuses changes for a model with a table, whatever called it.
  auto c = MakeClient(&sparse, 1, false);
  ASSERT_TRUE(c->Connect().ok());
  EXPECT_THAT(c->PushChangesThenPull(1).message(), HasSubstr("sparse table"));
}

}  // namespace
}  // namespace pl
