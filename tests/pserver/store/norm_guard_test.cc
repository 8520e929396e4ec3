// The NormGuard (pserver/store/norm_guard.h) on a shard: a push of finite but huge
// gradients (the 1e18 and 1e30 attacks) is refused once the parameter has a history,
// naming the parameter and both norms, and changes nothing; healthy pushes around it
// are applied; the absolute cap holds from the first push; tables are guarded too; a
// replica applies its primary's stream unguarded.
#include "pserver/store/norm_guard.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;

proto::PushRequest Dense(float scale, float value = 1.0f) {
  proto::PushRequest push;
  push.set_trainer_id(7);
  AddDense(&push, "p", 0, std::vector<float>(4, value * scale));
  return push;
}

TEST(NormGuard, AHugePushIsRefusedAfterTheWarmupAndChangesNothing) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {4}, 4, InitSpec::Constant(0.0f))}, Sgd(0.1f))).ok());
  // 20 healthy pushes of norm 2 (4 values of 1) and a little noise in scale.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Dense(1.0f + 0.01f * i))).ok()) << i;
  const std::vector<float> before = PullBlock(shard, "p", 0);
  for (const float attack : {1e18f, 1e30f}) {
    const auto refused = shard.Push(PushFrame::FromProtoRef(Dense(attack)));
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << attack;
    EXPECT_THAT(refused.status().message(), HasSubstr("trainer 7"));
    EXPECT_THAT(refused.status().message(), HasSubstr("gradient of 'p' has norm 2e+"));
    EXPECT_THAT(refused.status().message(), HasSubstr("more than 100x the median 2."));
    EXPECT_EQ(PullBlock(shard, "p", 0), before);
  }
  // Below the bound (50x the median) is training, not an attack: applied.
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Dense(50.0f))).ok());
  EXPECT_NE(PullBlock(shard, "p", 0), before);
  const ShardCounters c = shard.Counters();
  EXPECT_EQ(c.pushes_refused_norm, 2);
  EXPECT_EQ(c.pushes_rejected, 2);
  EXPECT_EQ(c.pushes_applied, 21);
}

TEST(NormGuard, BeforeTheWarmupOnlyTheAbsoluteCapApplies) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("p", {4}, 4, InitSpec::Constant(0.0f))}, Sgd(0.1f))).ok());
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Dense(1.0f))).ok());
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(Dense(1000.0f))).ok()) << "no history yet: not refused";
  NormGuardOptions capped;
  capped.max_norm = 10;
  shard.norm_guard().set_options(capped);
  const auto refused = shard.Push(PushFrame::FromProtoRef(Dense(6.0f)));  // norm 12
  EXPECT_THAT(refused.status().message(), HasSubstr("has norm 12 here, above the cap 10"));
  EXPECT_TRUE(shard.Push(PushFrame::FromProtoRef(Dense(4.0f))).ok());   // norm 8
}

TEST(NormGuard, ATablesRowsAreGuardedAndAReplicaFollowsUnguarded) {
  ParameterShard primary(0, 1), replica(0, 1);
  for (ParameterShard* s : {&primary, &replica}) {
    ASSERT_TRUE(s->Init(MakeInit({SparseSpec("emb", 2, 0, InitSpec::Constant(0.0f))}, Sgd(0.1f))).ok());
  }
  auto rows = [](float v) {
    proto::PushRequest push;
    AddRows(&push, "emb", 2, {1, 2}, {v, v, v, v});
    return push;
  };
  for (int i = 0; i < 25; ++i) ASSERT_TRUE(primary.Push(PushFrame::FromProtoRef(rows(0.5f))).ok());
  const auto refused = primary.Push(PushFrame::FromProtoRef(rows(1e18f)));
  EXPECT_THAT(refused.status().message(), HasSubstr("gradient of 'emb' has norm"));
  // A replica applies what its primary sent, as it is: it never refuses its stream.
  EXPECT_TRUE(replica.FollowPush(PushFrame::FromProtoRef(rows(1e18f))).ok());
}

TEST(NormGuard, BadOptionsAreRefusedNamingTheFlag) {
  NormGuardOptions o;
  o.max_ratio = 0.5;
  EXPECT_THAT(ValidateNormGuardOptions(o).message(), HasSubstr("--gradient_norm_ratio"));
  o = NormGuardOptions();
  o.max_norm = -1;
  EXPECT_THAT(ValidateNormGuardOptions(o).message(), HasSubstr("--max_gradient_norm"));
  EXPECT_TRUE(ValidateNormGuardOptions(NormGuardOptions()).ok());
}

// Issue 40: an Init that would pass the pserver's memory budget is refused before
// anything is allocated, naming the flag; what fits is made.
TEST(MemoryBudget, AnInitPastTheBudgetIsRefusedAndMakesNothing) {
  ParameterShard shard(0, 1);
  shard.set_memory_budget(4 << 20);  // 4 MB
  OptimizerSpec adam;
  adam.kind = OptimizerKind::kAdam;
  adam.learning_rate = 0.1f;
  // 1024 x 1024 floats with Adam's two slots: 12 MB.
  const auto big = shard.Init(MakeInit({DenseSpec("big", {1024, 1024}, 65536)}, adam));
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("12.0 MB"));
  EXPECT_THAT(big.status().message(), HasSubstr("--max_memory_mb"));
  EXPECT_EQ(shard.Counters().dense_elements, 0);
  // Two of 256 x 1024 with Adam: 6 MB together, refused whole; one alone (3 MB) fits.
  const auto two = shard.Init(
      MakeInit({DenseSpec("small", {256, 1024}, 65536), DenseSpec("more", {256, 1024}, 65536)}, adam));
  EXPECT_EQ(two.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(shard.Counters().dense_elements, 0);
  ASSERT_TRUE(shard.Init(MakeInit({DenseSpec("small", {256, 1024}, 65536)}, adam)).ok());
  EXPECT_EQ(shard.Counters().dense_elements, 256 * 1024);
}

// Issue 40: an initialised shard's model does not grow: a later Init may repeat it (or
// name part of it), but one adding a parameter is refused, naming it, and adds nothing.
TEST(InitModel, ALaterInitMayRepeatTheModelButNotGrowIt) {
  ParameterShard shard(0, 1);
  const auto model = MakeInit({DenseSpec("w", {4}, 4), SparseSpec("emb", 2)}, Sgd(0.1f));
  ASSERT_TRUE(shard.Init(model).ok());
  EXPECT_TRUE(shard.Init(model).ok());
  EXPECT_TRUE(shard.Init(MakeInit({DenseSpec("w", {4}, 4)}, Sgd(0.1f))).ok());
  const auto grown = shard.Init(MakeInit({DenseSpec("w", {4}, 4), DenseSpec("extra", {8192, 8192}, 65536)}, Sgd(0.1f)));
  EXPECT_EQ(grown.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(grown.status().message(), HasSubstr("adds 'extra'"));
  EXPECT_EQ(shard.Counters().dense_elements, 4);
}

}  // namespace
}  // namespace pl::pserver
