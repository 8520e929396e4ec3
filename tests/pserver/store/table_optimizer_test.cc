// A sparse table with its own optimizer (ParamSpec.optimizer) on a pserver: its rows
// follow that rule with that rule's state while the dense parameters follow the job's;
// the state survives a checkpoint; a later Init that asks for another optimizer for
// the table is refused naming both; a dense parameter cannot have one.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using namespace ::pl::pserver::testing;
using ::testing::HasSubstr;

OptimizerSpec Adam(float lr) {
  OptimizerSpec o;
  o.kind = OptimizerKind::kAdam;
  o.learning_rate = lr;
  return o;
}

proto::InitRequest Request(const OptimizerSpec& table_optimizer) {
  proto::ParamSpec table = SparseSpec("emb", 2, 0, InitSpec::Constant(1.0f));
  *table.mutable_optimizer() = OptimizerToProto(table_optimizer);
  return MakeInit({DenseSpec("w", {2}, 2, InitSpec::Constant(1.0f)), table}, Sgd(0.5f));
}

void PushOnes(ParameterShard& shard) {
  proto::PushRequest push;
  AddDense(&push, "w", 0, {1.0f, 1.0f});
  AddRows(&push, "emb", 2, {7}, {1.0f, 1.0f});
  ASSERT_TRUE(shard.Push(PushFrame::FromProtoRef(push)).ok());
}

TEST(TableOptimizer, ATablesRowsFollowItsOwnRuleAndTheDenseParametersTheJobs) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / ("table_opt_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  auto shard = std::make_unique<ParameterShard>(0, 1);
  ASSERT_TRUE(shard->Init(Request(Adam(0.1f))).ok());
  PushOnes(*shard);
  // SGD 0.5 on w: 1 - 0.5; Adam's first step on the row: 1 - lr.
  EXPECT_THAT(PullBlock(*shard, "w", 0), ::testing::ElementsAre(0.5f, 0.5f));
  EXPECT_THAT(PullRows(*shard, "emb", {7}),
              ::testing::ElementsAre(::testing::FloatNear(0.9f, 1e-6), ::testing::FloatNear(0.9f, 1e-6)));
  EXPECT_EQ(shard->tables().Stats()[0].optimizer(), Adam(0.1f).ToString());
  // Adam's m, v and step travel with the row: after a restore, its second step with the
  // same gradient moves it by lr again (m-hat = v-hat = 1 with bias correction).
  Checkpointer ckpt(dir, 0, 2, 10);
  ASSERT_TRUE(ckpt.Save(*shard).ok());
  auto restored = Checkpointer(dir, 0).RestoreLatest(1);
  ASSERT_TRUE(restored.ok() && restored->shard) << restored.status();
  PushOnes(*restored->shard);
  EXPECT_THAT(PullRows(*restored->shard, "emb", {7}),
              ::testing::ElementsAre(::testing::FloatNear(0.8f, 1e-5), ::testing::FloatNear(0.8f, 1e-5)));
  EXPECT_THAT(PullBlock(*restored->shard, "w", 0), ::testing::ElementsAre(0.0f, 0.0f));
  std::filesystem::remove_all(dir);
}

TEST(TableOptimizer, AnotherOptimizerForTheTableIsRefusedNamingBoth) {
  ParameterShard shard(0, 1);
  ASSERT_TRUE(shard.Init(Request(Adam(0.1f))).ok());
  auto again = shard.Init(Request(Adam(0.2f)));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("table 'emb': this pserver updates it with adam(lr=0.1"));
  EXPECT_THAT(again.status().message(), HasSubstr("the request asks for adam(lr=0.2"));
  proto::InitRequest without = MakeInit({SparseSpec("emb", 2, 0, InitSpec::Constant(1.0f))}, Sgd(0.5f));
  EXPECT_THAT(shard.Init(without).status().message(), HasSubstr("the request asks for the job's (sgd(lr=0.5"));
}

TEST(TableOptimizer, ADenseParameterOrABadOptimizerIsRefusedNamingIt) {
  proto::ParamSpec dense = DenseSpec("w", {2}, 2);
  *dense.mutable_optimizer() = OptimizerToProto(Adam(0.1f));
  ParameterShard shard(0, 1);
  auto init = shard.Init(MakeInit({dense}, Sgd(0.5f)));
  EXPECT_THAT(init.status().message(), HasSubstr("parameter 'w': a dense parameter takes the job's optimizer"));
  init = shard.Init(Request(Adam(-1.0f)));
  EXPECT_EQ(init.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(init.status().message(), HasSubstr("parameter 'emb': its optimizer: "));
  EXPECT_FALSE(shard.initialized());
}

}  // namespace
}  // namespace pl::pserver
